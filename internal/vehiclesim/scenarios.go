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

package vehiclesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// UDPPayload is the payload of one ForeignBursts datagram: a full 1500-byte
// IPv4 packet (1514 bytes on the wire).
const UDPPayload = DefaultMTU - 20 - 8

// listenTCP opens a TCP listener on h's LAN address (any port) inside h.
func listenTCP(h *Host) (*net.TCPListener, error) {
	var ln *net.TCPListener
	err := h.Do(func() error {
		var err error
		ln, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: h.Addr.AsSlice()})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", h.Name, h.Addr, err)
	}
	return ln, nil
}

// dialTCP connects from h's LAN address to addr; the socket lives in h.
func dialTCP(ctx context.Context, h *Host, addr net.Addr) (*net.TCPConn, error) {
	var c net.Conn
	err := h.Do(func() error {
		var err error
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: h.Addr.AsSlice()}, Timeout: 5 * time.Second}
		c, err = d.DialContext(ctx, "tcp4", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect %s -> %s: %w", h.Name, addr, err)
	}
	return c.(*net.TCPConn), nil
}

func sameVehicle(hosts ...*Host) (*Vehicle, error) {
	var v *Vehicle
	for _, h := range hosts {
		if h == nil {
			return nil, errors.New("nil host")
		}
		if v == nil {
			v = h.v
		} else if h.v != v {
			return nil, errors.New("hosts of different vehicles")
		}
	}
	if v == nil {
		return nil, errors.New("no hosts")
	}
	return v, nil
}

// firstErr keeps the first error of a group of goroutines and cancels them.
type firstErr struct {
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func (f *firstErr) set(err error) {
	f.once.Do(func() { f.err = err; f.cancel() })
}

// BurstStats is the outcome of Burst.
type BurstStats struct {
	Senders        int
	BytesPerSender int
	Rounds         int   // rounds whose every byte arrived
	BytesSent      int64 // written by all senders
	BytesReceived  int64
	Duration       time.Duration // first round's start to the end
	// RoundTimes holds, per completed round, the time from the instant the
	// senders were released to the receiver holding every byte of the round.
	// A round that lost a frame shows the retransmission timer here.
	RoundTimes []time.Duration
}

// MaxRoundTime is the slowest completed round.
func (s BurstStats) MaxRoundTime() time.Duration {
	var m time.Duration
	for _, d := range s.RoundTimes {
		m = max(m, d)
	}
	return m
}

// Burst is incast: several topics publishing at once into one receiver
// (field report scenario 1). Each sender holds its own TCP connection to
// receiver (opened once, like middleware); in each round every sender writes
// bytesPerSender at the same instant. Rounds start every `every` (or as soon
// as the previous round completed, if it took longer); every <= 0 runs one
// round and returns. Otherwise it runs until ctx ends, which is not an error.
// The connections use whatever routes (and so tuning) the hosts have.
func Burst(ctx context.Context, senders []*Host, receiver *Host, bytesPerSender int, every time.Duration) (BurstStats, error) {
	st := BurstStats{Senders: len(senders), BytesPerSender: bytesPerSender}
	if len(senders) == 0 || bytesPerSender <= 0 {
		return st, errors.New("burst: want senders and bytesPerSender > 0")
	}
	v, err := sameVehicle(append([]*Host{receiver}, senders...)...)
	if err != nil {
		return st, fmt.Errorf("burst: %w", err)
	}
	for _, s := range senders {
		if s == receiver {
			return st, fmt.Errorf("burst: %s sends to itself", s.Name)
		}
	}
	ctx, done, err := v.begin(ctx)
	if err != nil {
		return st, err
	}
	defer done()
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fe := &firstErr{cancel: cancel}

	ln, err := listenTCP(receiver)
	if err != nil {
		return st, fmt.Errorf("burst: %w", err)
	}
	var closers []io.Closer
	var cmu sync.Mutex
	addCloser := func(c io.Closer) {
		cmu.Lock()
		closers = append(closers, c)
		cmu.Unlock()
	}
	addCloser(ln)
	closeAll := func() {
		cmu.Lock()
		defer cmu.Unlock()
		for _, c := range closers {
			c.Close()
		}
	}
	stopClose := context.AfterFunc(gctx, closeAll)
	defer stopClose()
	defer closeAll()

	n := len(senders)
	out := make([]*net.TCPConn, n)
	index := map[string]int{}
	for i, s := range senders {
		c, err := dialTCP(gctx, s, ln.Addr())
		if err != nil {
			return st, fmt.Errorf("burst: %w", err)
		}
		addCloser(c)
		out[i] = c
		index[c.LocalAddr().String()] = i
	}
	in := make([]net.Conn, n)
	for range n {
		c, err := ln.Accept()
		if err != nil {
			return st, fmt.Errorf("burst: accept on %s: %w", receiver.Name, err)
		}
		addCloser(c)
		i, ok := index[c.RemoteAddr().String()]
		if !ok || in[i] != nil {
			return st, fmt.Errorf("burst: unexpected connection from %s", c.RemoteAddr())
		}
		in[i] = c
	}

	// Receiver side: per-connection byte counts; round k is complete when
	// every connection has delivered k*bytesPerSender.
	var (
		mu        sync.Mutex
		recv      = make([]int64, n)
		complete  int
		doneAt    = map[int]time.Time{}
		completed = make(chan struct{}, 1)
		received  atomic.Int64
		sent      atomic.Int64
		wg        sync.WaitGroup
	)
	for i, c := range in {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for {
				k, err := c.Read(buf)
				if k > 0 {
					now := time.Now()
					received.Add(int64(k))
					mu.Lock()
					recv[i] += int64(k)
					m := recv[0]
					for _, r := range recv {
						m = min(m, r)
					}
					if r := int(m / int64(bytesPerSender)); r > complete {
						for j := complete + 1; j <= r; j++ {
							doneAt[j] = now
						}
						complete = r
						select {
						case completed <- struct{}{}:
						default:
						}
					}
					mu.Unlock()
				}
				if err != nil {
					if gctx.Err() == nil {
						fe.set(fmt.Errorf("burst: receiving on %s: %w", receiver.Name, err))
					}
					return
				}
			}
		})
	}
	start := make([]chan struct{}, n)
	payload := make([]byte, bytesPerSender)
	for i, c := range out {
		start[i] = make(chan struct{}, 1)
		wg.Go(func() {
			for {
				select {
				case <-gctx.Done():
					return
				case <-start[i]:
				}
				k, err := c.Write(payload)
				sent.Add(int64(k))
				if err != nil {
					if gctx.Err() == nil {
						fe.set(fmt.Errorf("burst: sending from %s: %w", senders[i].Name, err))
					}
					return
				}
			}
		})
	}

	first := time.Now()
	var startAt []time.Time
	for k := 1; ; k++ {
		t0 := time.Now()
		startAt = append(startAt, t0)
		for i := range start {
			select {
			case start[i] <- struct{}{}:
			case <-gctx.Done():
			}
		}
		for {
			mu.Lock()
			c := complete
			mu.Unlock()
			if c >= k {
				break
			}
			select {
			case <-completed:
				continue
			case <-gctx.Done():
			}
			break
		}
		if gctx.Err() != nil {
			break
		}
		if every <= 0 {
			break
		}
		select {
		case <-time.After(time.Until(t0.Add(every))):
		case <-gctx.Done():
		}
		if gctx.Err() != nil {
			break
		}
	}
	end := time.Now()
	cancel()
	closeAll()
	wg.Wait()

	st.Duration = end.Sub(first)
	st.BytesSent, st.BytesReceived = sent.Load(), received.Load()
	mu.Lock()
	st.Rounds = min(complete, len(startAt))
	for k := 1; k <= st.Rounds; k++ {
		st.RoundTimes = append(st.RoundTimes, doneAt[k].Sub(startAt[k-1]))
	}
	mu.Unlock()
	if fe.err != nil {
		return st, fe.err
	}
	if every <= 0 && st.Rounds < 1 {
		return st, fmt.Errorf("burst: round not completed: %w", context.Cause(ctx))
	}
	return st, nil
}

// TransferStats is the outcome of HeavyTransfer.
type TransferStats struct {
	BytesSent     int64
	BytesReceived int64
	Duration      time.Duration
}

// Throughput is the received goodput in bit/s.
func (s TransferStats) Throughput() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.BytesReceived) * 8 / s.Duration.Seconds()
}

// HeavyTransfer is a long bulk TCP transfer from one host to another
// (someone copying logs; field report scenario 2), running until ctx ends,
// which is not an error.
func HeavyTransfer(ctx context.Context, from, to *Host) (TransferStats, error) {
	var st TransferStats
	v, err := sameVehicle(from, to)
	if err != nil {
		return st, fmt.Errorf("heavy transfer: %w", err)
	}
	if from == to {
		return st, errors.New("heavy transfer: from == to")
	}
	ctx, done, err := v.begin(ctx)
	if err != nil {
		return st, err
	}
	defer done()
	ln, err := listenTCP(to)
	if err != nil {
		return st, fmt.Errorf("heavy transfer: %w", err)
	}
	defer ln.Close()
	out, err := dialTCP(ctx, from, ln.Addr())
	if err != nil {
		return st, fmt.Errorf("heavy transfer: %w", err)
	}
	defer out.Close()
	in, err := ln.Accept()
	if err != nil {
		return st, fmt.Errorf("heavy transfer: accept: %w", err)
	}
	defer in.Close()
	startT := time.Now()
	stop := context.AfterFunc(ctx, func() { out.Close(); in.Close() })
	defer stop()

	var sent, received atomic.Int64
	var rerr, werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 256<<10)
		for {
			k, err := in.Read(buf)
			received.Add(int64(k))
			if err != nil {
				if ctx.Err() == nil {
					rerr = err
					out.Close()
				}
				return
			}
		}
	})
	wg.Go(func() {
		buf := make([]byte, 64<<10)
		for {
			k, err := out.Write(buf)
			sent.Add(int64(k))
			if err != nil {
				if ctx.Err() == nil {
					werr = err
					in.Close()
				}
				return
			}
		}
	})
	wg.Wait()
	st.Duration = time.Since(startT)
	st.BytesSent, st.BytesReceived = sent.Load(), received.Load()
	if ctx.Err() == nil {
		return st, fmt.Errorf("heavy transfer %s -> %s: %w", from.Name, to.Name, errors.Join(werr, rerr))
	}
	return st, nil
}

// UDPStats is the outcome of ForeignBursts.
type UDPStats struct {
	Bursts        int
	Datagrams     int64 // sent
	BytesSent     int64 // UDP payload
	BytesReceived int64 // UDP payload that reached the receiving socket
	Duration      time.Duration
}

// ForeignBursts sends short UDP bursts (a lidar point cloud, a log uploader;
// field report scenario 3): burstBytes in full-size datagrams
// (UDPPayload bytes each) as fast as the sender's NIC takes them — line rate
// with the default NIC shaping — every `every` until ctx ends (not an
// error); every <= 0 sends one burst. The receiver reads and discards.
func ForeignBursts(ctx context.Context, from, to *Host, burstBytes int, every time.Duration) (UDPStats, error) {
	return foreignUDP(ctx, "foreign bursts", []*Host{from}, to, burstBytes, every)
}

// AddrPort returns h's LAN address with port.
func (h *Host) AddrPort(port uint16) netip.AddrPort { return netip.AddrPortFrom(h.Addr, port) }

// ForeignIncast is ForeignBursts from several hosts at the same instant: in
// every round each sender writes burstBytes of full-size UDP datagrams as
// fast as its NIC takes them, all released together (a lidar point cloud
// and a log upload landing on the same compute unit). Two senders at line
// rate into one port of the same rate overflow its buffer whatever the TCP
// clamps are, so it makes loss that tuning cannot remove. Rounds start every
// `every` (or when the previous one finished, if later) until ctx ends,
// which is not an error; every <= 0 runs one round.
func ForeignIncast(ctx context.Context, from []*Host, to *Host, burstBytes int, every time.Duration) (UDPStats, error) {
	return foreignUDP(ctx, "foreign incast", from, to, burstBytes, every)
}

// foreignUDP is ForeignBursts and ForeignIncast; what names them in errors.
func foreignUDP(ctx context.Context, what string, from []*Host, to *Host, burstBytes int, every time.Duration) (UDPStats, error) {
	var st UDPStats
	if len(from) == 0 || burstBytes <= 0 {
		return st, fmt.Errorf("%s: want senders and burstBytes > 0", what)
	}
	v, err := sameVehicle(append([]*Host{to}, from...)...)
	if err != nil {
		return st, fmt.Errorf("%s: %w", what, err)
	}
	for _, h := range from {
		if h == to {
			return st, fmt.Errorf("%s: %s sends to itself", what, h.Name)
		}
	}
	ctx, done, err := v.begin(ctx)
	if err != nil {
		return st, err
	}
	defer done()
	var rc *net.UDPConn
	if err := to.Do(func() error {
		var err error
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: to.Addr.AsSlice()})
		return err
	}); err != nil {
		return st, fmt.Errorf("%s: listen on %s: %w", what, to.Name, err)
	}
	defer rc.Close()
	_ = rc.SetReadBuffer(4 << 20)
	dst := rc.LocalAddr().(*net.UDPAddr)
	socks := make([]*net.UDPConn, len(from))
	for i, h := range from {
		if err := h.Do(func() error {
			var err error
			socks[i], err = net.DialUDP("udp4", &net.UDPAddr{IP: h.Addr.AsSlice()}, dst)
			return err
		}); err != nil {
			for _, s := range socks[:i] {
				s.Close()
			}
			return st, fmt.Errorf("%s: socket on %s: %w", what, h.Name, err)
		}
	}
	stop := context.AfterFunc(ctx, func() {
		for _, s := range socks {
			s.Close()
		}
	})
	defer stop()
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()

	var received, datagrams, sentBytes atomic.Int64
	var rwg sync.WaitGroup
	rwg.Go(func() {
		buf := make([]byte, 65536)
		for {
			k, err := rc.Read(buf)
			received.Add(int64(k))
			if err != nil {
				return
			}
		}
	})
	// One goroutine per sender, released together by closing go_.
	var serr lockedErr
	payload := make([]byte, UDPPayload)
	startT := time.Now()
	for ctx.Err() == nil {
		t0 := time.Now()
		go_ := make(chan struct{})
		var wg sync.WaitGroup
		for _, s := range socks {
			wg.Go(func() {
				<-go_
				for left := burstBytes; left > 0; left -= UDPPayload {
					nw, err := s.Write(payload[:min(left, UDPPayload)])
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						// A NIC queue overflow (ENOBUFS) or an ICMP error is a
						// lost datagram, as on a real host.
						if !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.ECONNREFUSED) {
							serr.set(err)
							return
						}
						continue
					}
					datagrams.Add(1)
					sentBytes.Add(int64(nw))
				}
			})
		}
		close(go_)
		wg.Wait()
		st.Bursts++
		if serr.get() != nil || every <= 0 {
			break
		}
		select {
		case <-time.After(time.Until(t0.Add(every))):
		case <-ctx.Done():
		}
	}
	st.Duration = time.Since(startT)
	time.Sleep(20 * time.Millisecond)
	rc.Close()
	rwg.Wait()
	st.Datagrams, st.BytesSent, st.BytesReceived = datagrams.Load(), sentBytes.Load(), received.Load()
	if err := serr.get(); err != nil {
		return st, fmt.Errorf("%s -> %s: %w", what, to.Name, err)
	}
	return st, nil
}

// lockedErr keeps the first error set from several goroutines.
type lockedErr struct {
	mu  sync.Mutex
	err error
}

func (e *lockedErr) set(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

func (e *lockedErr) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
