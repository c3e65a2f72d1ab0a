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

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
)

// execute sends req on the handle's socket sh of netlink protocol proto and
// returns the payloads of the replies of type resType (0: all). A dump that
// the kernel reports as interrupted (the table changed meanwhile) is retried.
func execute(sh *nl.SocketHandle, proto int, newReq func() *nl.NetlinkRequest, resType uint16) ([][]byte, error) {
	const attempts = 5
	var err error
	for i := 0; i < attempts; i++ {
		req := newReq()
		req.Sockets = map[int]*nl.SocketHandle{proto: sh}
		var msgs [][]byte
		msgs, err = req.Execute(proto, resType)
		if errors.Is(err, nl.ErrDumpInterrupted) {
			continue
		}
		return msgs, err
	}
	return nil, err
}

// attr is one netlink attribute, kept raw.
type attr struct {
	Type  uint16 // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
	Value []byte
}

// parseAttrs splits a buffer of netlink attributes. The flag bits of the
// attribute type are cleared.
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4])
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("malformed netlink attribute (type %d, length %d, %d bytes left)", t, l, len(b))
		}
		out = append(out, attr{Type: t & nlaTypeMask, Value: b[4:l]})
		next := (l + 3) &^ 3
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return out, nil
}

const nlaTypeMask = 0x3fff // ^(NLA_F_NESTED|NLA_F_NET_BYTEORDER)

var nativeEndian = binary.NativeEndian

func u32(b []byte) (uint32, bool) {
	if len(b) < 4 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(b), true
}

func u16(b []byte) (uint16, bool) {
	if len(b) < 2 {
		return 0, false
	}
	return binary.NativeEndian.Uint16(b), true
}

func u64(b []byte) (uint64, bool) {
	if len(b) < 8 {
		return 0, false
	}
	return binary.NativeEndian.Uint64(b), true
}

// rawData is a NetlinkRequestData carrying preformatted bytes (a fixed
// header such as rtmsg, or a raw attribute).
type rawData []byte

func (r rawData) Len() int          { return len(r) }
func (r rawData) Serialize() []byte { return r }

// encodeAttr serializes one attribute with padding.
func encodeAttr(t uint16, v []byte) []byte {
	l := 4 + len(v)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:2], uint16(l))
	binary.NativeEndian.PutUint16(b[2:4], t)
	copy(b[4:], v)
	return b
}
