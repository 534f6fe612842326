package main

import (
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// systemdNotifier returns what tells systemd of serve's state (sd_notify(3): a datagram to
// $NOTIFY_SOCKET), for server.Config.Notify, and the interval of the watchdog pings: half of
// $WATCHDOG_USEC when systemd set one for this process. Without $NOTIFY_SOCKET it returns nil
// and 0, and serve runs as it does anywhere else.
func systemdNotifier(log *slog.Logger) (notify func(state string), watchdog time.Duration) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil, 0
	}
	var warned atomic.Bool
	notify = func(state string) {
		if _, err := daemon.SdNotify(false, state); err != nil && !warned.Swap(true) {
			// Once: a watchdog ping that cannot be sent would say it again every interval.
			first, _, _ := strings.Cut(state, "\n")
			log.Warn("cannot notify systemd", "state", first, "socket", os.Getenv("NOTIFY_SOCKET"), "err", err)
		}
	}
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("no watchdog pings", "err", err)
		return notify, 0
	}
	return notify, d / 2
}
