package server

import (
	_ "embed"
	"net/http"
)

// openapi is the API's OpenAPI 3 description, served at
// /v1/openapi.json; TestOpenAPIListsEveryRoute keeps it in step with the
// routes.
//
//go:embed openapi.json
var openapi []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapi)
}
