package benchkit

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as a thread can
	// name itself: the fields are counted from the last ')'.
	line := []byte("4242 (we) ird) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 30 7 3 20 0 12 0 1000 1 1\n")
	got, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := CPU{Self: 2800 * time.Millisecond, Children: 100 * time.Millisecond}
	if got != want {
		t.Errorf("parseStat = %+v, want %+v", got, want)
	}
	if _, err := parseStat([]byte("4242 (short) S 1 2")); err == nil {
		t.Error("a truncated stat line parsed")
	}
}

func TestReadCPU(t *testing.T) {
	if _, err := ReadCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
	if _, err := ReadThreadsCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
	if _, err := ReadCPU(1 << 30); err == nil {
		t.Error("ReadCPU of a pid that cannot exist succeeded")
	}
}

func TestQuantile(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 3}, {0.9, 5}, {1, 5}} {
		if got := Quantile(d, c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if d[0] != 5 {
		t.Error("Quantile sorted its argument")
	}
	if Median(nil) != 0 {
		t.Error("Median(nil) != 0")
	}
}

func TestParseStatus(t *testing.T) {
	raw := []byte("Name:\trunnel\nVmHWM:\t   31744 kB\nVmRSS:\t   27340 kB\nThreads:\t7\n")
	got, err := parseStatus(42, raw)
	want := Status{RSSKiB: 27340, HWMKiB: 31744, Threads: 7}
	if err != nil || got != want {
		t.Errorf("parseStatus = %+v, %v; want %+v", got, err, want)
	}
	if _, err := parseStatus(42, []byte("Name:\tzombie\n")); err == nil {
		t.Error("a status without VmRSS parsed")
	}
	if _, err := ReadStatus(os.Getpid()); err != nil {
		t.Error(err)
	}
}
