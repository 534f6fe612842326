package main

import (
	"flag"
	"net"
	"net/http"
	"strconv"
)

// httpNull is the HTTP counterpart of nullServer: a net/http server that stores nothing and
// answers every GET with one fixed body held in memory. Measured with the same load generator
// as blobcache serve and nginx, it shows what the Go runtime and net/http cost per request on
// the machine, apart from anything a cache does.
func httpNull(args []string) error {
	fl := flag.NewFlagSet("httpnull", flag.ExitOnError)
	addr := fl.String("addr", "127.0.0.1:8080", "HTTP address")
	size := fl.Int("value-size", 4096, "bytes of the body every GET answers")
	fl.Parse(args)
	srv := &http.Server{Handler: nullHandler(*size)}
	return untilSignal(*addr, srv.Serve, func(net.Listener) { srv.Close() })
}

// nullHandler answers every GET or HEAD with the same body of size bytes, anything else with
// 405.
func nullHandler(size int) http.Handler {
	body := nullValue(size)
	length := strconv.Itoa(size)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h["Content-Type"] = []string{"application/octet-stream"}
		h["Content-Length"] = []string{length}
		if r.Method == http.MethodGet {
			w.Write(body)
		}
	})
}
