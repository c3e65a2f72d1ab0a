/*
Copyright 2026 The nettune Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package latency measures host-pair message latency the way the vehicle's
// middleware sees it: a topic emulator publishes fixed-size messages at a
// fixed rate over one persistent TCP connection per (topic, peer) and times
// each message from just before its first byte is written until the peer's
// application-level acknowledgement is read (one clock: the sender's).
//
// # Wire protocol (on the agent's probe port, default 9102)
//
// A latency client opens a TCP connection and writes the magic line
//
//	"NTLP1\n"
//
// then any number of messages, each a frame
//
//	[u32 big-endian payload length][u64 big-endian seq][payload]
//
// and the server answers every complete message with its 8-byte big-endian
// seq, in order (pipelining is allowed). Connections that do not start with
// the magic (the post-apply connect probes, tcp_metrics priming, anything
// else) are read and discarded until EOF, as the probe port always did.
package latency

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// Magic is the first line a latency client writes.
const Magic = "NTLP1\n"

const (
	headerLen = 12 // u32 length + u64 seq
	ackLen    = 8
	// MaxPayload is the largest message the server accepts (a frame
	// announcing more is a protocol error and the connection is closed).
	MaxPayload = 64 << 20
)

// Connection kinds as seen by serve.
const (
	kindDiscard = "discard"
	kindLatency = "latency"
)

// Serve handles one connection accepted on the probe port and closes it:
// a latency client (magic first) gets an acknowledgement per message; any
// other connection is read until EOF and discarded.
func Serve(conn net.Conn) {
	_, _ = serve(conn)
}

// serve is Serve reporting what the connection was and why it ended (nil at
// a clean EOF).
func serve(conn net.Conn) (kind string, err error) {
	defer conn.Close()
	r := bufio.NewReaderSize(conn, 64<<10)
	head := make([]byte, 0, len(Magic))
	for len(head) < len(Magic) {
		b, err := r.ReadByte()
		if err != nil {
			return kindDiscard, eofIsNil(err)
		}
		head = append(head, b)
		if !bytes.HasPrefix([]byte(Magic), head) {
			_, err := io.Copy(io.Discard, r)
			return kindDiscard, err
		}
	}
	return kindLatency, serveMessages(conn, r)
}

// serveMessages reads frames and acknowledges each complete one.
func serveMessages(conn net.Conn, r *bufio.Reader) error {
	var hdr [headerLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("connection ended inside a message header: %w", err)
			}
			return eofIsNil(err)
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		if n > MaxPayload {
			return fmt.Errorf("message %d announces %d bytes, more than %d", binary.BigEndian.Uint64(hdr[4:12]), n, MaxPayload)
		}
		if _, err := r.Discard(int(n)); err != nil {
			return fmt.Errorf("connection ended inside message %d: %w", binary.BigEndian.Uint64(hdr[4:12]), err)
		}
		// The ack is the seq, written at once: Go sockets run with
		// TCP_NODELAY, so it leaves without waiting for more.
		if _, err := conn.Write(hdr[4:12]); err != nil {
			return fmt.Errorf("acknowledging message %d: %w", binary.BigEndian.Uint64(hdr[4:12]), err)
		}
	}
}

func eofIsNil(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// putHeader writes a frame header for a payload of size bytes.
func putHeader(b []byte, size int, seq uint64) {
	binary.BigEndian.PutUint32(b[0:4], uint32(size))
	binary.BigEndian.PutUint64(b[4:12], seq)
}
