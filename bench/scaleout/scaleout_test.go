package main

import (
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// The head of HAProxy 2.6's `show stat` columns, as the socket sends
	// them: a header, then frontends, servers and backends.
	csv := "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,\n" +
		"runnel_front,FRONTEND,,,3,9,8192,120,1,2,0,0,0,,,,,OPEN,,\n" +
		"runnel,r1,0,0,1,3,,40,1,2,,0,,0,0,0,0,UP,1,\n" +
		"runnel,r2,0,0,0,3,,39,1,2,,0,,0,0,4,3,DOWN 1/2,1,\n" +
		"runnel,r3,0,0,0,3,,41,1,2,,0,,0,0,0,0,DOWN,1,\n" +
		"runnel,BACKEND,0,0,1,9,820,120,1,2,0,0,,0,0,0,0,UP,2,\n\n"
	got, err := parseStat(csv, "runnel")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]serverStat{"r1": {"UP", 40, 0, 0}, "r2": {"DOWN 1/2", 39, 4, 3}, "r3": {"DOWN", 41, 0, 0}}
	if len(got) != len(want) {
		t.Fatalf("parseStat = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("server %s = %+v, want %+v", k, got[k], v)
		}
	}
	if _, err := parseStat("Unknown command\n", "runnel"); err == nil {
		t.Error("an answer without a header parsed")
	}
}

func TestOutcomeInFlight(t *testing.T) {
	t0 := time.Now()
	o := outcome{start: t0, end: t0.Add(2 * time.Second)}
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{-time.Second, false}, {0, false}, {time.Second, true}, {2 * time.Second, false}} {
		if got := o.inFlightAt(t0.Add(c.at)); got != c.want {
			t.Errorf("inFlightAt(start%+v) = %v, want %v", c.at, got, c.want)
		}
	}
}
