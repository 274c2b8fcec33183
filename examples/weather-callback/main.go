// Command weather-callback is the platform side of the README walk-through:
// a toolCallback endpoint that answers runnel's callback envelope
// (DESIGN §4.2) for one tool, get_weather.
//
//	go run ./examples/weather-callback            # listens on 127.0.0.1:8791
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
)

type envelope struct {
	Data struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"data"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8791", "address to listen on")
	flag.Parse()
	http.HandleFunc("POST /tools/call", func(w http.ResponseWriter, r *http.Request) {
		var env envelope
		if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
			http.Error(w, "bad envelope", http.StatusBadRequest)
			return
		}
		var args struct {
			City string `json:"city"`
		}
		_ = json.Unmarshal(env.Data.Function.Arguments, &args)
		log.Printf("tool call %s: %s(%s)", env.Data.ID, env.Data.Function.Name, env.Data.Function.Arguments)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"call": map[string]any{
			"id":     env.Data.ID,
			"status": map[string]string{"code": "STATUS_CODE_OK"},
			"data": map[string]string{
				"role": "tool", "tool_call_id": env.Data.ID,
				"content": fmt.Sprintf("18°C and sunny in %s", args.City),
			},
		}})
	})
	log.Printf("weather callback listening on http://%s/tools/call", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
