package front

import (
	"bytes"
	"io"

	"github.com/mcpgate/mcpgate/internal/buffers"
)

// initialBodyBuf is the most a body's first buffer holds.
const initialBodyBuf = 16 << 10

// maxBodyChunk is the most one later chunk of a body holds.
const maxBodyChunk = 1 << 20

// readAll reads rd to its end and returns the body in one buffer of its
// exact length, which the caller owns (the parsed messages point into it
// for as long as anything holds them, so it is never pooled).
//
// A peer's announced length is not trusted (DESIGN: grow buffers as bytes
// arrive): the first buffer holds at most initialBodyBuf, or the announced
// length and one byte more to see the end without another read. A body
// that does not fit goes on into pooled chunks, each twice the last (at
// most maxBodyChunk, and never past the announced length), and is copied
// once into its exact buffer at the end; the chunks go back to the pool.
// So a 1 MiB body costs one allocation of 1 MiB and one copy of it, where
// a buffer doubled in place cost 2 MiB of fresh, zeroed memory and a copy
// per doubling, and a peer that announces much and sends little still gets
// little.
func readAll(rd io.Reader, announced int64) ([]byte, error) {
	size := int64(512)
	if announced >= 0 {
		size = min(announced+1, initialBodyBuf)
	}
	buf := make([]byte, 0, size)
	// Pooled chunks after the first buffer (buf is the last one's bytes),
	// and every buffer's bytes: a 1 MiB body needs about ten, on the stack.
	var chunkSpace [16]*[]byte
	var partSpace [17][]byte
	chunks, parts := chunkSpace[:0], append(partSpace[:0], nil)
	defer func() {
		for _, c := range chunks {
			buffers.Put(c)
		}
	}()
	total := int64(0) // in full chunks before buf
	for {
		if len(buf) == cap(buf) {
			if len(chunks) == 0 {
				parts[0] = buf
			} else {
				*chunks[len(chunks)-1] = buf
				parts = append(parts, buf)
			}
			total += int64(len(buf))
			more := int64(min(2*cap(buf), maxBodyChunk))
			if announced >= 0 && total < announced+1 {
				more = min(more, announced+1-total)
			}
			c := buffers.Get(int(more))
			chunks = append(chunks, c)
			buf = *c
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if len(chunks) == 0 {
				return buf, nil
			}
			// One exact buffer; bytes.Join does not zero what it fills.
			return bytes.Join(append(parts, buf), nil), nil
		}
		if err != nil {
			return nil, err
		}
	}
}
