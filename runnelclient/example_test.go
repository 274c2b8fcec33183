package runnelclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/server"
	"github.com/runnel/runnel/runnelclient"
)

func Example() {
	// A runnel to talk to: here its real handler on a loopback port, with
	// a runner that echoes; in production, `runnel serve`.
	srv := httptest.NewServer(server.New(runnerFunc(echo), &server.Options{Token: "s3cret"}))
	defer srv.Close()

	ctx := context.Background()
	c := runnelclient.New(srv.URL, runnelclient.WithToken("s3cret"), runnelclient.WithHTTPClient(srv.Client()))
	res, err := c.Stream(ctx, &runnel.RunRequest{Model: "openai/gpt-5", Messages: []runnel.Message{runnel.UserText("hi")}},
		func(e runnel.Event) {
			if e.Type == runnel.EventMessageDelta {
				fmt.Println(e.Delta)
			}
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Usage.Total)

	// Refusals are typed errors carrying runnel's sentence and code.
	_, err = runnelclient.New(srv.URL, runnelclient.WithHTTPClient(srv.Client())).Capabilities(ctx)
	var rerr *runnelclient.Error
	if errors.As(err, &rerr) {
		fmt.Println(rerr.StatusCode, rerr.Code, rerr.Message)
	}
	// Output:
	// echo: hi
	// completed 5
	// 401 unauthorized Unauthorized
}
