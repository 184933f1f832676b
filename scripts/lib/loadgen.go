// The benchmarks' open-loop load generator (scripts/lib/loadgen.mjs builds and runs it; scripts/bench/gateway.mjs and
// scripts/bench/mesh.mjs measure their fixed-rate latency with it). Request i is due at start + i/rate whatever the
// answers do; its latency runs from that scheduled time to the end of its response, so a stall of the path measured
// shows in every request it delays, including those it kept waiting for a connection (no coordinated omission: the
// method of wrk2 and YCSB's "intended" latency). It differs on purpose from Envoy's benchmarking client, Nighthawk
// (envoyproxy/nighthawk), which reports "queueing and connection setup" apart from "request start to response
// end": here one figure runs from the due time, and the requests that waited for a connection are counted
// (`queued`). Requests go over HTTP/1.1 keep-alive connections: `connections` are opened
// before the schedule starts; a request that finds none idle opens one more up to `maxConnections`, then waits for
// the first to be free (counted in `queued`).
//
// Why Go and not Node (measured on the 2-core benchmark machines, 1000 rps, other work running): Node's timers have
// millisecond resolution, so an event-loop generator sends late by up to a millisecond and, on a busy machine, by
// several (send lateness p99 3–4 ms for mesh.mjs's former JS generator); keeping a sub-millisecond schedule in Node
// takes a busy-polling loop (setImmediate), which burns a whole core of the two the proxies measured run on, and
// still timestamps answers only when the loop comes round. Here one OS thread sleeps with clock_nanosleep to the
// absolute due time (timer slack 1 ns) and writes the request itself; answers are read by one goroutine per
// connection woken by the kernel's readiness, so the generator spends a few percent of a core. The wake-up is what
// a virtual machine's timer gives (tens of microseconds); under a load of other processes a normal-priority thread
// can wait milliseconds for a core, so the scripts run the process under SCHED_FIFO priority 1 (chrt) by default.
//
// Input: one JSON argument {host, port, path, authority, headers, rate, duration, warmup, connections, maxConnections,
// timeout, spinUs}. The warm-up is the first `warmup` seconds of the same schedule on the same connections; what is
// measured follows without a gap. Output: `{"measuring":true}` when the measured part starts, then one JSON line
// with counts, latency percentiles (ms), the send lateness (ms: when the request was written, or handed to a new or
// busy connection, minus when it was due) and the generator's own CPU seconds during the measured part.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

type config struct {
	Host           string            `json:"host"`
	Port           int               `json:"port"`
	Path           string            `json:"path"`
	Authority      string            `json:"authority"`
	Headers        map[string]string `json:"headers"`
	Rate           float64           `json:"rate"`
	Duration       float64           `json:"duration"`
	Warmup         float64           `json:"warmup"`
	Connections    int               `json:"connections"`
	MaxConnections int               `json:"maxConnections"`
	Timeout        float64           `json:"timeout"`
	SpinUs         float64           `json:"spinUs"`
}

// base is the origin of every time here: durations since it come from Go's monotonic clock (vDSO), and baseMono is
// the same instant on CLOCK_MONOTONIC, the clock clock_nanosleep sleeps on.
var (
	base     time.Time
	baseMono int64
)

func now() int64 { return int64(time.Since(base)) }

func clockMono() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Sec*1e9 + ts.Nsec
}

// sleepUntil sleeps to `at` (ns since base) on an absolute CLOCK_MONOTONIC deadline, so that the time taken by one
// request's write is not added to the next one's wait; spin > 0 sleeps to `at - spin` and polls the clock from there.
func sleepUntil(at, spin int64) {
	target := baseMono + at - spin
	ts := syscall.Timespec{Sec: target / 1e9, Nsec: target % 1e9}
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_CLOCK_NANOSLEEP, 1 /* CLOCK_MONOTONIC */, 1 /* TIMER_ABSTIME */, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e != syscall.EINTR {
			break
		}
	}
	for spin > 0 && now() < at {
	}
}

// phase holds the figures of one part of the schedule (the warm-up, then the measured part).
type phase struct {
	latency          []int64 // ns, per answered request
	late             []int64 // ns, per sent request
	nLat, nLate      atomic.Int64
	sent, ok, non2xx atomic.Int64
	errors, done     atomic.Int64
	retries, queued  atomic.Int64
}

func newPhase(requests int) *phase {
	return &phase{latency: make([]int64, requests+16), late: make([]int64, requests+16)}
}

func (p *phase) lateness(d int64) {
	if i := p.nLate.Add(1) - 1; int(i) < len(p.late) {
		p.late[i] = d
	}
}

// request is one scheduled request: when it was due and which phase counts it.
type request struct {
	due   int64
	phase *phase
}

type conn struct {
	c    net.Conn
	br   *bufio.Reader
	req  request
	used int // requests written on this connection
}

type pool struct {
	cfg     config
	addr    string
	head    []byte
	mu      sync.Mutex
	idle    []*conn
	open    int
	maxOpen int
	pending []request
}

// dispatch sends r on an idle connection, or a new one while there may be more, or queues it for the first that is
// free; it returns when r has been handed on, which is the end of its send lateness.
func (p *pool) dispatch(r request) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.assign(c, r)
		p.mu.Unlock()
		p.write(c)
		return
	}
	if p.open < p.cfg.MaxConnections {
		p.open++
		p.maxOpen = maxOf(p.maxOpen, p.open)
		p.mu.Unlock()
		go p.dial(r, false)
		return
	}
	p.pending = append(p.pending, r)
	p.mu.Unlock()
	r.phase.queued.Add(1)
}

// assign makes r the request in flight on c; under p.mu, so that a reader seeing c close knows whether a request
// was on it.
func (p *pool) assign(c *conn, r request) {
	c.req = r
	c.used++
}

func (p *pool) write(c *conn) {
	if _, err := c.c.Write(p.head); err != nil {
		// the reader sees the connection fail too and settles the request
		c.c.Close()
	}
}

// dial opens a connection for r, or (idle) one to keep idle, opened before the schedule starts.
func (p *pool) dial(r request, idle bool) error {
	nc, err := net.DialTimeout("tcp", p.addr, 10*time.Second)
	if err != nil {
		p.mu.Lock()
		p.open--
		p.mu.Unlock()
		if !idle {
			r.phase.errors.Add(1)
			r.phase.done.Add(1)
			p.next()
		}
		return err
	}
	c := &conn{c: nc, br: bufio.NewReaderSize(nc, 16384)}
	if idle {
		p.mu.Lock()
		p.idle = append(p.idle, c)
		p.mu.Unlock()
	} else {
		// not shared yet: no lock needed
		p.assign(c, r)
		p.write(c)
	}
	go p.read(c)
	return nil
}

// next gives a queued request a new connection when one closed and left room for it.
func (p *pool) next() {
	p.mu.Lock()
	if len(p.pending) == 0 || p.open >= p.cfg.MaxConnections {
		p.mu.Unlock()
		return
	}
	r := p.pending[0]
	p.pending = p.pending[1:]
	p.open++
	p.mu.Unlock()
	go p.dial(r, false)
}

// read reads the answers of c as they come and hands c its next request (a queued one, or back to the idle ones).
func (p *pool) read(c *conn) {
	for {
		status, keep, got, err := readResponse(c.br)
		t := now()
		if err != nil {
			p.closed(c, got)
			return
		}
		p.mu.Lock()
		r := c.req
		c.req = request{}
		p.mu.Unlock()
		ph := r.phase
		if i := ph.nLat.Add(1) - 1; int(i) < len(ph.latency) {
			ph.latency[i] = t - r.due
		}
		if status >= 200 && status < 300 {
			ph.ok.Add(1)
		} else {
			ph.non2xx.Add(1)
		}
		ph.done.Add(1)
		if !keep {
			p.closed(c, true)
			return
		}
		p.mu.Lock()
		if len(p.pending) > 0 {
			q := p.pending[0]
			p.pending = p.pending[1:]
			p.assign(c, q)
			p.mu.Unlock()
			p.write(c)
			continue
		}
		p.idle = append(p.idle, c)
		p.mu.Unlock()
	}
}

// closed retires c. A request written on a reused connection that the server closed before answering a byte is the
// keep-alive race (the server closed an idle connection as the request went out): it goes once more on a new
// connection, as a browser or Envoy would, counted in `retries`; any other request in flight is an error.
func (p *pool) closed(c *conn, got bool) {
	c.c.Close()
	p.mu.Lock()
	r := c.req
	c.req = request{}
	for i, x := range p.idle {
		if x == c {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	if r.phase != nil && !got && c.used > 1 {
		p.mu.Unlock()
		r.phase.retries.Add(1)
		go p.dial(r, false)
		return
	}
	p.open--
	p.mu.Unlock()
	if r.phase != nil {
		r.phase.errors.Add(1)
		r.phase.done.Add(1)
	}
	p.next()
}

var errFraming = errors.New("malformed response")

// readResponse reads one HTTP/1.1 response as far as its framing needs: the status, whether the connection stays
// open, and whether any byte came at all.
func readResponse(br *bufio.Reader) (status int, keep bool, got bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, len(line) > 0, err
	}
	got = true
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, got, errFraming
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, got, errFraming
	}
	keep = line[7] == '1'
	length := int64(-1)
	chunked := false
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return status, false, got, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		colon := bytes.IndexByte(h, ':')
		if colon < 0 {
			continue
		}
		name := h[:colon]
		value := bytes.TrimSpace(h[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("content-length")):
			length, err = strconv.ParseInt(string(value), 10, 64)
			if err != nil {
				return status, false, got, errFraming
			}
		case bytes.EqualFold(name, []byte("transfer-encoding")):
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("connection")):
			v := bytes.ToLower(value)
			if bytes.Contains(v, []byte("close")) {
				keep = false
			} else if bytes.Contains(v, []byte("keep-alive")) {
				keep = true
			}
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304:
		// no body
	case chunked:
		for {
			l, err := br.ReadSlice('\n')
			if err != nil {
				return status, false, got, err
			}
			l = bytes.TrimRight(l, "\r\n")
			if i := bytes.IndexByte(l, ';'); i >= 0 {
				l = l[:i]
			}
			size, err := strconv.ParseInt(string(bytes.TrimSpace(l)), 16, 64)
			if err != nil {
				return status, false, got, errFraming
			}
			if size == 0 {
				// trailers, up to the empty line
				for {
					t, err := br.ReadSlice('\n')
					if err != nil {
						return status, false, got, err
					}
					if len(bytes.TrimRight(t, "\r\n")) == 0 {
						return status, keep, got, nil
					}
				}
			}
			if _, err := br.Discard(int(size) + 2); err != nil {
				return status, false, got, err
			}
		}
	case length >= 0:
		if _, err := br.Discard(int(length)); err != nil {
			return status, false, got, err
		}
	default:
		// the body runs to the end of the connection
		_, err := io.Copy(io.Discard, br)
		return status, false, got, err
	}
	return status, keep, got, nil
}

func percentile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[minOf(maxOf(i, 0), len(sorted)-1)]) / 1e6
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// finite writes NaN (no answer at all) as null, which JSON has and Go's encoder refuses as a float.
type finite float64

func (f finite) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return []byte(strconv.FormatFloat(float64(f), 'f', 4, 64)), nil
}

func run(cfg config) (map[string]any, error) {
	p := &pool{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}
	head := fmt.Sprintf("GET %s HTTP/1.1\r\nhost: %s\r\n", cfg.Path, cfg.Authority)
	for k, v := range cfg.Headers {
		head += k + ": " + v + "\r\n"
	}
	p.head = []byte(head + "\r\n")
	for i := 0; i < cfg.Connections; i++ {
		p.open++
		if err := p.dial(request{}, true); err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", p.addr, err)
		}
	}
	p.maxOpen = p.open
	interval := 1e9 / cfg.Rate
	warm := newPhase(int(cfg.Rate*cfg.Warmup) + 1)
	measured := newPhase(int(cfg.Rate*cfg.Duration) + 1)
	spin := int64(cfg.SpinUs * 1e3)

	// the schedule: one OS thread of its own, to sleep and send on time
	runtime.LockOSThread()
	syscall.Syscall(syscall.SYS_PRCTL, 29 /* PR_SET_TIMERSLACK */, 1, 0)
	debug.SetGCPercent(-1) // a few hundred bytes per request; no collector pause in the measurement
	start := now() + int64(10*time.Millisecond)
	warmEnd := start + int64(cfg.Warmup*1e9)
	end := warmEnd + int64(cfg.Duration*1e9)
	var cpu0 float64
	measuring := false
	for i := 0; ; i++ {
		due := start + int64(float64(i)*interval)
		if due >= end {
			break
		}
		ph := warm
		if due >= warmEnd {
			ph = measured
			if !measuring {
				measuring = true
				os.Stdout.WriteString("{\"measuring\":true}\n")
				cpu0 = cpuSeconds()
			}
		}
		sleepUntil(due, spin)
		ph.sent.Add(1)
		p.dispatch(request{due: due, phase: ph})
		ph.lateness(now() - due)
	}
	cpu := cpuSeconds() - cpu0
	runtime.UnlockOSThread()

	// the answers still due: waited for up to `timeout`, then counted as unanswered
	deadline := time.Now().Add(time.Duration(cfg.Timeout * 1e9))
	for measured.done.Load() < measured.sent.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.mu.Lock()
	maxOpen := p.maxOpen
	p.mu.Unlock()
	m := measured
	lat := append([]int64(nil), m.latency[:minOf(int(m.nLat.Load()), len(m.latency))]...)
	late := append([]int64(nil), m.late[:minOf(int(m.nLate.Load()), len(m.late))]...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	var sum int64
	for _, x := range lat {
		sum += x
	}
	mean := math.NaN()
	if len(lat) > 0 {
		mean = float64(sum) / float64(len(lat)) / 1e6
	}
	maxLat := math.NaN()
	if len(lat) > 0 {
		maxLat = float64(lat[len(lat)-1]) / 1e6
	}
	answered := m.ok.Load() + m.non2xx.Load()
	return map[string]any{
		"sent":           m.sent.Load(),
		"ok":             m.ok.Load(),
		"non2xx":         m.non2xx.Load(),
		"errors":         m.errors.Load(),
		"unanswered":     m.sent.Load() - m.done.Load(),
		"retries":        m.retries.Load(),
		"queued":         m.queued.Load(),
		"connections":    maxOpen,
		"seconds":        cfg.Duration,
		"rps":            finite(float64(answered) / cfg.Duration),
		"p50":            finite(percentile(lat, 0.5)),
		"p90":            finite(percentile(lat, 0.9)),
		"p99":            finite(percentile(lat, 0.99)),
		"p999":           finite(percentile(lat, 0.999)),
		"max":            finite(maxLat),
		"mean":           finite(mean),
		"sendLateP50":    finite(percentile(late, 0.5)),
		"sendLateP99":    finite(percentile(late, 0.99)),
		"sendLateMax":    finite(percentile(late, 1)),
		"generatorCpu":   finite(cpu),
		"warmupSent":     warm.sent.Load(),
		"warmupFailures": warm.errors.Load() + warm.non2xx.Load(),
	}, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen '<json: host, port, path, rate, duration, warmup, connections, maxConnections, timeout>'")
		os.Exit(2)
	}
	cfg := config{Path: "/", Connections: 1, Timeout: -1}
	if err := json.Unmarshal([]byte(os.Args[1]), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(2)
	}
	if cfg.Host == "" || cfg.Port <= 0 || cfg.Rate <= 0 || cfg.Duration <= 0 {
		fmt.Fprintln(os.Stderr, "loadgen: host, port, rate and duration are required")
		os.Exit(2)
	}
	if cfg.Authority == "" {
		cfg.Authority = net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	}
	cfg.MaxConnections = maxOf(cfg.MaxConnections, cfg.Connections, 1)
	if cfg.Timeout < 0 {
		cfg.Timeout = maxOf(10, cfg.Duration)
	}
	// spare processors: the scheduling thread holds one while it sleeps in a system call
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(maxOf(4, runtime.NumCPU()))
	}
	base = time.Now()
	baseMono = clockMono()
	out, err := run(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(out)
	os.Stdout.Write(append(b, '\n'))
	os.Exit(0)
}

// minOf and maxOf stand in for Go 1.21's builtins: CI builds this with Debian 12's Go 1.19.
func minOf[T int | int64 | float64](first T, rest ...T) T {
	m := first
	for _, v := range rest {
		if v < m {
			m = v
		}
	}
	return m
}

func maxOf[T int | int64 | float64](first T, rest ...T) T {
	m := first
	for _, v := range rest {
		if v > m {
			m = v
		}
	}
	return m
}
