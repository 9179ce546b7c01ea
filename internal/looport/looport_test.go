package looport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFree: the port is below the ephemeral range and can be listened on,
// and so can its bus port.
func TestFree(t *testing.T) {
	lo := ephemeralLow()
	for _, bus := range []bool{false, true} {
		port, err := Free(bus)
		require.NoError(t, err)
		require.Less(t, port, lo)
		require.GreaterOrEqual(t, port, lo-span)
		ports := []int{port}
		if bus {
			ports = append(ports, port+10000)
		}
		for _, p := range ports {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			require.NoError(t, err)
			require.NoError(t, l.Close())
		}
	}
}
