package benchkit

import (
	"encoding/json"
	"io"
	"net/http"
)

// ReadToolCall reads what runnel posts to a tool callback (Agenta's
// envelope, {"data": {"id", "function": {"name"}}}): the call's id and the
// tool's name.
func ReadToolCall(r *http.Request) (id, name string, err error) {
	var in struct {
		Data struct {
			ID       string `json:"id"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"data"`
	}
	err = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in)
	return in.Data.ID, in.Data.Function.Name, err
}

// WriteToolResult answers a tool callback: call id succeeded with content.
func WriteToolResult(w http.ResponseWriter, id, content string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"call": map[string]any{
		"id": id, "status": map[string]string{"code": "STATUS_CODE_OK"},
		"data": map[string]string{"role": "tool", "tool_call_id": id, "content": content}}})
}
