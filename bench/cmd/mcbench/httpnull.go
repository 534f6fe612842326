package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
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
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := &http.Server{Handler: nullHandler(*size)}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// nullHandler answers every GET or HEAD with the same body of size bytes, anything else with
// 405.
func nullHandler(size int) http.Handler {
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
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
