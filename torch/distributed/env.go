// Package distributed runs micrograph on several processes with
// torch.distributed's engine (c10d, see torch.ProcessGroup): the torchrun
// environment, the ranks of a job started on this machine (Local), the
// start of a group from the environment, and what data-parallel training
// does with the group (parameters broadcast from rank 0, gradients summed in
// flat buckets, sums completed across ranks).
package distributed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/micrograph/micrograph/torch"
)

// Env is the torchrun environment of one process.
type Env struct {
	Rank       int    // RANK: this process, 0 … WorldSize−1
	WorldSize  int    // WORLD_SIZE: processes in the job
	LocalRank  int    // LOCAL_RANK: this process on its machine (its GPU)
	MasterAddr string // MASTER_ADDR: the host of rank 0's TCPStore
	MasterPort int    // MASTER_PORT
}

// Variables of the torchrun environment.
const (
	EnvRank       = "RANK"
	EnvWorldSize  = "WORLD_SIZE"
	EnvLocalRank  = "LOCAL_RANK"
	EnvMasterAddr = "MASTER_ADDR"
	EnvMasterPort = "MASTER_PORT"
)

// FromEnv reads the torchrun environment. Without WORLD_SIZE and RANK (or
// with WORLD_SIZE=1) the process runs alone: ok is false and no group is
// needed. One of the two without the other is an error: a rank started
// alone would otherwise run, and write, a whole job of its own.
func FromEnv() (e Env, ok bool, err error) {
	ws, rank := os.Getenv(EnvWorldSize), os.Getenv(EnvRank)
	switch {
	case ws == "" && rank == "":
		return Env{WorldSize: 1}, false, nil
	case ws == "":
		return Env{}, false, fmt.Errorf("environment %s=%s is set but %s is not: a launcher sets both (unset %s to run alone)", EnvRank, rank, EnvWorldSize, EnvRank)
	case rank == "":
		return Env{}, false, fmt.Errorf("environment %s=%s is set but %s is not: a launcher sets both (unset %s to run alone)", EnvWorldSize, ws, EnvRank, EnvWorldSize)
	}
	num := func(name string, def string) int {
		v := os.Getenv(name)
		if v == "" {
			v = def
		}
		n, perr := strconv.Atoi(v)
		if perr != nil && err == nil {
			err = fmt.Errorf("environment %s=%q: not an integer", name, v)
		}
		return n
	}
	e = Env{
		WorldSize:  num(EnvWorldSize, ""),
		Rank:       num(EnvRank, ""),
		LocalRank:  num(EnvLocalRank, "0"),
		MasterAddr: os.Getenv(EnvMasterAddr),
		MasterPort: num(EnvMasterPort, "29500"),
	}
	if err != nil {
		return Env{}, false, err
	}
	switch {
	case e.WorldSize < 1:
		return Env{}, false, fmt.Errorf("environment %s=%d: must be positive", EnvWorldSize, e.WorldSize)
	case e.Rank < 0 || e.Rank >= e.WorldSize:
		return Env{}, false, fmt.Errorf("environment %s=%d: outside 0…%d (%s=%d)", EnvRank, e.Rank, e.WorldSize-1, EnvWorldSize, e.WorldSize)
	case e.WorldSize == 1:
		return e, false, nil
	case e.MasterAddr == "":
		return Env{}, false, fmt.Errorf("environment %s is empty: the host of rank 0 is needed when %s=%d", EnvMasterAddr, EnvWorldSize, e.WorldSize)
	}
	return e, true, nil
}

// Vars is e as the environment variables that FromEnv reads, NAME=VALUE.
func (e Env) Vars() []string {
	return []string{
		EnvRank + "=" + strconv.Itoa(e.Rank), EnvWorldSize + "=" + strconv.Itoa(e.WorldSize),
		EnvLocalRank + "=" + strconv.Itoa(e.LocalRank), EnvMasterAddr + "=" + e.MasterAddr,
		EnvMasterPort + "=" + strconv.Itoa(e.MasterPort),
	}
}

// Backend is the backend for tensors on dev: NCCL for GPUs, Gloo otherwise.
func Backend(dev torch.Device) string {
	if dev.IsCUDA() {
		return torch.NCCL
	}
	return torch.Gloo
}

// Join starts e's process group for tensors on dev, waiting at most
// timeout for every rank; timeout also bounds each later collective, so a
// rank that dies makes the others fail within it instead of waiting forever.
//
// SIGINT and SIGTERM are blocked on the joining thread (and so on the
// threads c10d starts from it) while it joins: delivered there, they would
// interrupt c10d's connect or poll, which fails with "Interrupted system
// call" before the signal's own handling (a stop, or the end of the
// command with 128 + its number) is seen; the process's other threads
// take them.
func Join(e Env, dev torch.Device, timeout time.Duration) (*torch.ProcessGroup, error) {
	g, err := withoutInterrupts(func() (*torch.ProcessGroup, error) {
		return torch.NewProcessGroup(Backend(dev), e.MasterAddr, e.MasterPort, e.Rank, e.WorldSize, timeout)
	})
	if err != nil {
		if cause := rendezvousCause(e); cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("joining the job (rank %d of %d): %w", e.Rank, e.WorldSize, err)
	}
	return g, nil
}

// withoutInterrupts runs f on a thread of its own with SIGINT and SIGTERM
// blocked, then unblocks them.
func withoutInterrupts[T any](f func() (T, error)) (T, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		set.Val[(sig-1)/64] |= 1 << ((uint(sig) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return f()
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return f()
}

// rendezvousCause names, after a failed rendezvous, the two causes that
// c10d's message leaves to be inferred: a MASTER_ADDR that does not resolve
// (c10d retries it until the timeout and then says only that it could not
// connect) and, on rank 0, a MASTER_PORT that another process holds. Nil
// when neither is the case.
func rendezvousCause(e Env) error {
	if _, err := net.LookupHost(e.MasterAddr); err != nil {
		return fmt.Errorf("environment %s=%s: the name does not resolve (%v)", EnvMasterAddr, e.MasterAddr, err)
	}
	if e.Rank == 0 {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(e.MasterPort))
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("environment %s=%d: the port is in use on this host, where rank 0 serves the job's store (choose another)", EnvMasterPort, e.MasterPort)
		}
		if err == nil {
			l.Close()
		}
	}
	return nil
}
