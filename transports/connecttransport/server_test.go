package connecttransport_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/backends/memstore"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/connecttransport"
)

// TestNewValidates checks that New names the bad field of a configuration.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, mem.Close()) })
	engine, err := core.NewEngine(core.EngineConfig{Store: mem})
	require.NoError(t, err)
	for _, tc := range []struct {
		cfg  connecttransport.Config
		want string
	}{
		{connecttransport.Config{}, "Config.Engine"},
		{connecttransport.Config{Engine: engine, ClaimWait: time.Hour}, "Config.ClaimWait"},
		{connecttransport.Config{Engine: engine, SendTimeout: -time.Second}, "SendTimeout"},
		{connecttransport.Config{Engine: engine, MaxSubscribers: -1}, "Config.MaxSubscribers"},
	} {
		_, err := connecttransport.New(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	_, err = connecttransport.New(connecttransport.Config{Engine: engine})
	require.NoError(t, err)
}
