// Package looport picks loopback ports for test servers that stop and
// start again on the same port.
//
// A port the kernel handed out for "127.0.0.1:0" comes from its ephemeral
// range, which it also draws on for every outgoing connection: once such
// a server stops, a parallel test's connection or listener may take its
// port before it starts again ("bind: address already in use", seen in
// CI). Free picks below that range, where the kernel never picks.
package looport

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// span is how many ports below the ephemeral range Free picks from.
const span = 12000

// Free returns a loopback port below the kernel's ephemeral range that was
// free a moment ago: a listener on it, closed, or, with bus, a listener on
// it and one on it plus 10 000 (a Redis Cluster node's bus port).
func Free(bus bool) (int, error) {
	lo := ephemeralLow()
	for range 100 {
		port := lo - span + rand.IntN(span)
		if !free(port) || bus && !free(port+10000) {
			continue
		}
		return port, nil
	}
	return 0, errors.New("looport: no free port below the ephemeral range")
}

// free reports whether a listener could take port on 127.0.0.1.
func free(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ephemeralLow returns the first port of Linux's ephemeral range, or the
// IANA one's (49152) where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > span+1024 {
				return lo
			}
		}
	}
	return 49152
}
