package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxOutputBytes caps what one tool call gives the model, as for
// callback tools (DESIGN §4.2).
const DefaultMaxOutputBytes = 1_000_000

// Result is what an MCP tool call gives the model.
type Result struct {
	// Content is the text content joined by newlines; other content is
	// summarised ("[image image/png, 1234 bytes]"); with no text at all, the
	// structured content as JSON. Capped, with " [... N bytes omitted]".
	Content string
	// IsError is the server's isError: the tool ran and failed, and the
	// model should see why.
	IsError bool
}

// resultOf reduces a CallToolResult to text for the model.
func resultOf(res *mcp.CallToolResult, maxBytes int) Result {
	var parts []string
	hasText := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			hasText = true
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s%s]", c.URI, labelled(c.Name, c.MIMEType)))
		case *mcp.EmbeddedResource:
			parts = append(parts, embeddedText(c.Resource))
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	if !hasText && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append([]string{string(b)}, parts...)
		}
	}
	return Result{Content: capText(strings.Join(parts, "\n"), maxBytes), IsError: res.IsError}
}

func embeddedText(r *mcp.ResourceContents) string {
	switch {
	case r == nil:
		return "[resource]"
	case r.Blob != nil:
		return fmt.Sprintf("[resource %s%s, %d bytes]", r.URI, labelled("", r.MIMEType), len(r.Blob))
	default:
		return fmt.Sprintf("[resource %s%s]\n%s", r.URI, labelled("", r.MIMEType), r.Text)
	}
}

func labelled(name, mime string) string {
	var s string
	if name != "" {
		s += " " + name
	}
	if mime != "" {
		s += " (" + mime + ")"
	}
	return s
}

func orUnknown(mime string) string {
	if mime == "" {
		return "of unknown type"
	}
	return mime
}

// capText cuts s to max bytes on a character boundary and says how much
// was left out.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s [... %d bytes omitted]", s[:cut], len(s)-cut)
}
