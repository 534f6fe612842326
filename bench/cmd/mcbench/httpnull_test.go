package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHTTPNull(t *testing.T) {
	s := httptest.NewServer(nullHandler(5))
	defer s.Close()
	for _, c := range []struct {
		method, body string
		status       int
	}{
		{http.MethodGet, "abcde", http.StatusOK},
		{http.MethodHead, "", http.StatusOK},
		{http.MethodPut, "", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(c.method, s.URL+"/key-1", strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.status || string(b) != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.method, resp.StatusCode, b, c.status, c.body)
		}
		if c.status == http.StatusOK && resp.ContentLength != 5 {
			t.Errorf("%s: Content-Length %d, want 5", c.method, resp.ContentLength)
		}
	}
}
