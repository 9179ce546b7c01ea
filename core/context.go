package core

import "context"

// Transport names for WithTransport.
const (
	TransportHTTP      = "http"
	TransportWebSocket = "websocket"
	TransportNATS      = "nats"
	TransportGRPC      = "grpc"
	TransportKafka     = "kafka"
)

// transportKey is the context key of WithTransport.
type transportKey struct{}

// WithTransport returns a context that names the transport a call comes
// through, such as TransportHTTP, so that decorators of the Store can label
// metrics and spans without the transport importing them.
func WithTransport(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, transportKey{}, name)
}

// TransportFrom returns the transport named by WithTransport, or "".
func TransportFrom(ctx context.Context) string {
	name, _ := ctx.Value(transportKey{}).(string)
	return name
}
