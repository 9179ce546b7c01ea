package connecttransport

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/delayq/delayq/core"
	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// codeTable maps the codes of docs/api.md, which wire.ToError gives every
// core sentinel, to gRPC status codes: the one place that decides the
// status of an error of this transport. A conflict is Aborted whatever its
// cause (an id in use, a lost lease, a job not in the state asked for),
// as the HTTP API answers 409 for each; the delayq.v1.Error detail keeps
// the HTTP code, so too_large and rate_limited, both ResourceExhausted as
// gRPC answers an oversized message, are told apart there.
var codeTable = map[string]connect.Code{
	wire.CodeInvalidArgument:      connect.CodeInvalidArgument,
	wire.CodeUnauthenticated:      connect.CodeUnauthenticated,
	wire.CodePermissionDenied:     connect.CodePermissionDenied,
	wire.CodeNotFound:             connect.CodeNotFound,
	wire.CodeConflict:             connect.CodeAborted,
	wire.CodeTooLarge:             connect.CodeResourceExhausted,
	wire.CodeRateLimited:          connect.CodeResourceExhausted,
	wire.CodeUnsupportedMediaType: connect.CodeInvalidArgument,
	wire.CodeMisdirectedRequest:   connect.CodePermissionDenied,
	wire.CodeUnavailable:          connect.CodeUnavailable,
	wire.CodeUnimplemented:        connect.CodeUnimplemented,
	wire.CodeInternal:             connect.CodeInternal,
}

// toConnectError maps err, returned by a handler of a call with ctx, to the
// error the client gets: the status of codeTable, the message wire.ToError
// shows (fixed for server errors), and a delayq.v1.Error detail with the
// HTTP API's code, message and field, the existing job of a conflict when
// the call's token may use its topic, and when to retry. A *connect.Error
// (from connect itself) and a call the client ended pass as they are.
func (s *Server) toConnectError(ctx context.Context, procedure string, err error) error {
	if _, ok := errors.AsType[*connect.Error](err); ok {
		return err
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
	}
	e := s.apiError(ctx, err)
	s.logError(procedure, e, err)
	ce := connect.NewError(codeTable[e.Code], errors.New(e.Message))
	if d, derr := connect.NewErrorDetail(errorMessage(e)); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// apiError maps err with wire.ToError as the call's token may see it
// (service.Visible).
func (s *Server) apiError(ctx context.Context, err error) wire.Error {
	return service.Visible(ctx, wire.ToError(err))
}

// errorMessage is e as the delayq.v1.Error of a detail or a batch item.
func errorMessage(e wire.Error) *delayqv1.Error {
	m := &delayqv1.Error{Code: e.Code, Message: e.Message, Field: e.Field}
	if e.Job != nil {
		m.Job = jobMessage(e.Job)
	}
	if e.RetryAfter > 0 {
		m.RetryAfter = e.RetryAfter.String()
	}
	return m
}

// logError logs errors that are the server's fault.
func (s *Server) logError(procedure string, e wire.Error, err error) {
	switch e.Code {
	case wire.CodeUnavailable:
		s.log.Warn("connecttransport: unavailable", "procedure", procedure, "err", err)
	case wire.CodeInternal:
		s.log.Error("connecttransport: internal error", "procedure", procedure, "err", err)
	}
}

// interceptor makes sure every call, unary and streaming, was
// authenticated (by authenticateFirst, before its body was read), names the
// transport for the store's decorators, and maps the error of the call with
// toConnectError under the call's identity (which decides whether a
// conflict shows its job).
type interceptor struct{ s *Server }

// WrapUnary implements connect.Interceptor.
func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		procedure := req.Spec().Procedure
		if err := i.s.authenticated(ctx); err != nil {
			return nil, i.s.toConnectError(ctx, procedure, err)
		}
		res, err := next(core.WithTransport(ctx, core.TransportGRPC), req)
		if err != nil {
			return nil, i.s.toConnectError(ctx, procedure, err)
		}
		return res, nil
	}
}

// WrapStreamingClient implements connect.Interceptor; the server has no
// clients.
func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		procedure := conn.Spec().Procedure
		if err := i.s.authenticated(ctx); err != nil {
			return i.s.toConnectError(ctx, procedure, err)
		}
		if err := next(core.WithTransport(ctx, core.TransportGRPC), conn); err != nil {
			return i.s.toConnectError(ctx, procedure, err)
		}
		return nil
	}
}
