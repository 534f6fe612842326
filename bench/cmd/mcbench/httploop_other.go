//go:build !linux

package main

import "errors"

// httpLoop needs epoll: Linux only.
func httpLoop([]string) error { return errors.New("httploop: Linux only") }
