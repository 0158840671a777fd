package data

import (
	"os"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithPrivateUserCache(m))
}
