package main

import (
	"runtime/debug"
	"strconv"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/torch"
)

// version is micrograph's release.
const version = "0.1.0"

func runVersion(args []string) error {
	fs := newFlags("version", "", "Prints micrograph's version, libtorch's, whether CUDA works, and RDKit's.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	build := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				build = " (" + s.Value[:12] + ")"
			}
		}
	}
	printf("micrograph %s%s", version, build)
	cuda := "CUDA not available"
	if n := torch.CUDADeviceCount(); n > 0 {
		cuda = "CUDA works: " + strconv.Itoa(n) + " GPU(s)"
	}
	printf("libtorch %s, %s", torch.Version(), cuda)
	if core := torch.OpenBLASCore(); core != "" {
		printf("OpenBLAS kernels %s", core)
	}
	if v, err := rdkit.RDKitVersion(); err == nil {
		printf("RDKit %s", v)
	} else {
		printf("RDKit not available: %v", err)
	}
	return nil
}
