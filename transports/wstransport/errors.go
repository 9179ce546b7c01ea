package wstransport

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq/transports/wire"
)

// errNotWebSocket is returned for a request to the subscribe route that
// does not ask for a WebSocket upgrade.
var errNotWebSocket = errors.New("not a WebSocket upgrade")

// toWireError maps err with wire.ToError, which gives the codes of frames
// and the HTTP statuses of the answers given before the upgrade, and
// errNotWebSocket, which no core sentinel covers, to 400 invalid_argument
// with its own message.
func toWireError(err error) wire.Error {
	e := wire.ToError(err)
	if e.Code == wire.CodeInternal && errors.Is(err, errNotWebSocket) {
		e.Status, e.Code, e.Message = http.StatusBadRequest, wire.CodeInvalidArgument, err.Error()
	}
	return e
}
