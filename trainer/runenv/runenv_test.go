package runenv

import (
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// restartHelperEnv makes the test binary a program that restarts with its
// library settings and prints what it then runs with.
const restartHelperEnv = "MICROGRAPH_RUNENV_RESTART_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(restartHelperEnv) != "" {
		RestartWithLibrarySettings()
		os.Stdout.WriteString("core=" + torch.OpenBLASCore() + " omp=" + os.Getenv("OMP_WAIT_POLICY") +
			" timeout=" + os.Getenv("OPENBLAS_THREAD_TIMEOUT") + "\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestOpenBLASCoreType(t *testing.T) {
	avx2 := vectorUnits{AVX2FMA: true}
	avx512 := vectorUnits{AVX2FMA: true, AVX512: true}
	tests := []struct {
		core string
		cpu  vectorUnits
		want string
	}{
		{"Prescott", avx512, "SkylakeX"}, // OpenBLAS 0.3.21 on an Emerald Rapids Xeon
		{"Prescott", avx2, "Haswell"},
		{"Prescott", vectorUnits{}, ""}, // an old CPU: OpenBLAS's choice is right
		{"Sandybridge", avx2, "Haswell"},
		{"Nehalem", avx512, "SkylakeX"},
		{"Haswell", avx512, ""}, // a known CPU keeps OpenBLAS's choice (Zen 4 on Haswell's kernels)
		{"Zen", avx512, ""},
		{"SkylakeX", avx512, ""},
		{"COOPERLAKE", avx512, ""},
		{"SapphireRapids", avx512, ""},
		{"", avx512, ""}, // no OpenBLAS: MKL picks its own kernels
	}
	for _, tc := range tests {
		if got := openBLASCoreType(tc.core, tc.cpu); got != tc.want {
			t.Errorf("openBLASCoreType(%q, %+v) = %q, want %q", tc.core, tc.cpu, got, tc.want)
		}
	}
}

func TestLibrarySettings(t *testing.T) {
	idle := []string{"OMP_WAIT_POLICY=PASSIVE", "OPENBLAS_THREAD_TIMEOUT=4"}
	if got := librarySettings("Haswell", vectorUnits{AVX2FMA: true}); !reflect.DeepEqual(got, idle) {
		t.Errorf("librarySettings on a CPU OpenBLAS knows = %q, want %q", got, idle)
	}
	want := append(idle, "OPENBLAS_CORETYPE=SkylakeX")
	if got := librarySettings("Prescott", vectorUnits{AVX2FMA: true, AVX512: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("librarySettings on a CPU OpenBLAS does not know = %q, want %q", got, want)
	}
}

// The restart gives the program the settings (on this CPU, the kernels
// openBLASCoreType picks from what OpenBLAS chose for this test binary,
// which did not restart), and keeps every variable the user set.
func TestRestartWithLibrarySettings(t *testing.T) {
	if os.Getenv("OPENBLAS_CORETYPE") != "" {
		t.Skip("OPENBLAS_CORETYPE is set for the tests: OpenBLAS's own choice is unknown here")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "OMP_WAIT_POLICY" && name != "OPENBLAS_THREAD_TIMEOUT" && name != "OPENBLAS_CORETYPE" {
			base = append(base, kv)
		}
	}
	base = append(base, restartHelperEnv+"=1")
	detected := torch.OpenBLASCore()
	// What the restarted program runs on: the kernels chosen for it, or
	// the user's; none without OpenBLAS.
	chosen, users := detected, "Prescott"
	if core := openBLASCoreType(detected, hostVectorUnits()); core != "" {
		chosen = core
	}
	if detected == "" {
		users = ""
	}
	tests := []struct {
		name string
		user []string
		want string
	}{
		{"nothing set", nil, "core=" + chosen + " omp=PASSIVE timeout=4"},
		{"the user's kernels", []string{"OPENBLAS_CORETYPE=Prescott"}, "core=" + users + " omp=PASSIVE timeout=4"},
		{"the user's thread settings", []string{"OMP_WAIT_POLICY=ACTIVE", "OPENBLAS_THREAD_TIMEOUT=7"},
			"core=" + chosen + " omp=ACTIVE timeout=7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run", "^$")
			cmd.Env = append(append([]string{}, base...), tc.user...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			if got := strings.TrimSpace(string(out)); !strings.EqualFold(got, tc.want) {
				t.Errorf("after the restart: %q, want %q (OpenBLAS chose %q here)", got, tc.want, detected)
			}
		})
	}
}
