//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// errNoIsolation is why a host without Linux namespaces has no isolated
// sandbox.
var errNoIsolation = errors.New("the isolated sandbox needs Linux namespaces")

// ProbeIsolator reports that there is no isolated sandbox here.
func ProbeIsolator(ctx context.Context, opts *IsolatorOptions) (*Isolator, error) {
	return &Isolator{detail: errNoIsolation.Error() + " (this is not Linux)"}, nil
}

// Init is never run outside Linux: no isolator starts it.
func Init(args []string) int {
	fmt.Fprintln(os.Stderr, "runnel sandbox:", errNoIsolation)
	return 126
}
