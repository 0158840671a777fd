package runpool

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// A process serves only the pool whose token its WorkerEnv carries: a
// hello from its parent with another token is refused before any job.
func TestServeRefusesAnotherPoolsToken(t *testing.T) {
	hello := fmt.Sprintf(`{"kind":"k","parent":%d,"token":"another"}`+"\n", os.Getppid())
	err := serve(nil, "this", strings.NewReader(hello), io.Discard)
	if err == nil || err.Error() != "the pool's hello does not carry the token of "+WorkerEnv {
		t.Errorf("%v; want the token refused", err)
	}
}
