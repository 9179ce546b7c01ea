package wstransport

import (
	"context"
	"errors"
	"io"

	"github.com/coder/websocket"

	"github.com/delayq/delayq/core"
)

// frameBufMin is the capacity a frame buffer starts with, which an ack,
// nack or touch frame usually fits.
const frameBufMin = 512

// readOne reads one client frame and answers it (a frame that is no text,
// is over Config.MaxFrameBytes or cannot be decoded gets an error frame) or
// dispatches it. It returns the connection's errors only, which end the
// subscription: among them a frame over Config.MaxFrameHardBytes, the
// connection's read limit, fails with websocket.ErrMessageTooBig and the
// connection is closed with status 1009.
func (sub *subscription) readOne() error {
	typ, r, err := sub.conn.Reader(context.Background())
	if err != nil {
		return err
	}
	if typ != websocket.MessageText {
		// Refused whatever it holds: nothing of it is kept.
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
		sub.sendError(core.Invalid("", "frames must be JSON text messages"), "")
		return nil
	}
	limit := sub.srv.cfg.MaxFrameBytes
	bp := sub.srv.frameBuf()
	data, size, err := readFrame(r, *bp, limit)
	if err != nil {
		sub.srv.putFrameBuf(bp, data)
		return err
	}
	if size > limit {
		sub.srv.putFrameBuf(bp, data)
		// Not decoded, so no id; and nothing of its content is repeated.
		sub.sendError(core.Invalid("", "the frame has %d bytes, over the limit of %d bytes: it was ignored", size, limit), "")
		return nil
	}
	// The decoded frame holds no part of data: the buffer goes back now,
	// not after dispatch, which may wait.
	f, err := decodeFrame(data)
	sub.srv.putFrameBuf(bp, data)
	if err != nil {
		sub.sendError(err, f.ID)
		return nil
	}
	sub.dispatch(f)
	return nil
}

// frameBuf returns a buffer of the pool, to be given back with
// putFrameBuf.
func (s *Server) frameBuf() *[]byte {
	if bp, ok := s.frameBufs.Get().(*[]byte); ok {
		return bp
	}
	return new([]byte)
}

// putFrameBuf gives bp back to the pool holding data, the buffer readFrame
// returned (at most Config.MaxFrameBytes+1 bytes of capacity).
func (s *Server) putFrameBuf(bp *[]byte, data []byte) {
	*bp = data[:0]
	s.frameBufs.Put(bp)
}

// readFrame reads the message r to its end, keeping at most limit+1 bytes of
// it in buf, which it grows as needed but never past a capacity of limit+1;
// the rest is read and thrown away, so that a frame over the limit costs
// no more memory than one at the limit. It returns what it kept (the
// buffer, to be reused) and the size of the whole message: when size is
// over limit, data is only its first limit+1 bytes. Errors are r's; what
// was read before one is returned with it.
func readFrame(r io.Reader, buf []byte, limit int64) (data []byte, size int64, err error) {
	keep := int(limit) + 1
	buf = buf[:0]
	for len(buf) < keep {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(max(2*cap(buf), frameBufMin), keep))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), keep)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, int64(len(buf)), nil
		}
		if err != nil {
			return buf, int64(len(buf)), err
		}
	}
	n, err := io.Copy(io.Discard, r)
	return buf, int64(len(buf)) + n, err
}
