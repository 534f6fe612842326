// Package testproc starts the external servers tests compare against or run behind (memcached,
// nutcracker) on a free loopback port, and starts one again on another port when another process
// took the port meanwhile. It is imported by tests only.
package testproc
