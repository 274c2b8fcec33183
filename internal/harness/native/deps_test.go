package native

import (
	"go/build"
	"slices"
	"testing"
)

// TestNoHTTP guards the architecture: the loop talks to a Model and a
// Dispatcher, never to the network itself (DESIGN §1).
func TestNoHTTP(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, forbidden := range []string{"net/http", "net", "os/exec", "github.com/runnel/runnel/internal/tools"} {
		if slices.Contains(pkg.Imports, forbidden) {
			t.Errorf("package native imports %s", forbidden)
		}
	}
}
