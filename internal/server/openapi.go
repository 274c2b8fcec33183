package server

import (
	_ "embed" // the OpenAPI document
	"encoding/json"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of runnel's HTTP API,
// written by hand next to the handlers it describes. The tests check it
// against the routes of New and against real recorded traffic, so a field
// or route added without it fails them.
//
//go:embed openapi.json
var openAPIDocument string

// openAPI serves GET /openapi.json. It is open, like /health: the document
// holds no secret, and a person or a client generator reads it before
// holding a token.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, json.RawMessage(openAPIDocument))
}
