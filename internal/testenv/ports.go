package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FreePort is a loopback TCP port for a job the test starts to listen on,
// held for the test. A port merely free a moment ago can be taken before
// the job binds it, by any socket the kernel gives an ephemeral port (an
// outgoing connection on a busy machine) or by another test process doing
// the same; so the port lies outside the kernel's ephemeral range, which it
// never hands out by itself, and it is claimed by a lock file in the
// temporary folder that no other test process can take until this test
// ends. Only a program binding that very port by name can still take it.
func FreePort(tb testing.TB) int {
	tb.Helper()
	lo, hi := ephemeralRange()
	var candidates []int
	for p := 10000; p < 65536; p++ {
		if p < lo || p > hi {
			candidates = append(candidates, p)
		}
	}
	rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	for _, p := range candidates[:min(len(candidates), 200)] {
		lock, err := os.OpenFile(filepath.Join(os.TempDir(), "micrograph-test-port-"+strconv.Itoa(p)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			tb.Fatalf("a port's lock file: %v", err)
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			lock.Close() // another test process holds it
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			lock.Close() // bound by something else
			continue
		}
		l.Close()
		tb.Cleanup(func() { lock.Close() }) // closing releases the lock
		return p
	}
	tb.Fatalf("no free port among 200 tried outside the ephemeral range %d–%d", lo, hi)
	return 0
}

// ephemeralRange is the kernel's range of automatically assigned ports
// (Linux's default where it cannot be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		a, errA := strconv.Atoi(f[0])
		b, errB := strconv.Atoi(f[1])
		if errA == nil && errB == nil && a <= b {
			return a, b
		}
	}
	return lo, hi
}

// HangReport fires 30 seconds before the test's deadline (never without
// one): a test that waits for an event selects on it to report a hang
// itself, with what it waited for, before go test's timeout kills the
// binary without a word. It is not a timing condition of the test.
func HangReport(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) - 30*time.Second)
}
