package mcp_test

import (
	"encoding/json"
	"fmt"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/mcp"
)

// Normalize reduces both request shapes to one and refuses, with a
// sentence naming the server and the rule, what runnel will not connect to.
func ExampleNormalize() {
	var servers []runnel.McpServer
	_ = json.Unmarshal([]byte(`[
		{"name": "memory", "connection": {"type": "http", "url": "https://mcp.example.com/mcp"},
		 "policy": {"tools": {"mode": "include", "names": ["read_graph"]}, "permission": "ask"}},
		{"name": "docs", "transport": "sse", "url": "https://docs.example.com/sse"}
	]`), &servers)
	specs, err := mcp.Normalize(servers, mcp.GuardOptions{})
	fmt.Println(len(specs), err)
	for _, s := range specs {
		fmt.Printf("%s %s %s %v permission=%q\n", s.Name, s.Transport, s.ToolMode, s.Include, s.Permission)
	}

	_, err = mcp.Normalize([]runnel.McpServer{{Name: "meta", URL: "https://169.254.169.254/latest"}}, mcp.GuardOptions{})
	fmt.Println(err)
	// Output:
	// 2 <nil>
	// memory http include [read_graph] permission="ask"
	// docs sse all [] permission=""
	// MCP server "meta": https://169.254.169.254 points at 169.254.169.254, a cloud metadata address; runnel only connects to public addresses unless the host is in RUNNEL_MCP_HOST_ALLOWLIST.
}
