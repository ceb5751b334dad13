// Command forwarding measures what an SFU costs per forwarded stream, without
// browsers: synthetic pion participants in rooms (7 by default), each
// publishing a VP8-sized stream at ~30 packets/s and an Opus-sized one at
// 50 packets/s and receiving everyone else's, for 1, 2 and 4 rooms. It reads
// the SFU's CPU time from /proc/<pid>/stat and prints, per room count, the
// CPU per forwarded stream, packet loss and one-way latency.
//
//	go run . -spawn /path/to/sfu-inhouse            # starts the in-house SFU itself
//	go run . -sfu inhouse -url ws://127.0.0.1:7000/ -pid 1234
//
// Only a Driver (driver.go, janus.go) knows an SFU's signalling. Janus skips
// loopback interfaces, so it is measured in the local lab:
// bench/forwarding.py runs this (-json) against each SFU there and prints
// them side by side.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type config struct {
	driver   Driver
	url      string
	pid      int
	roomSize int
	warmup   time.Duration
	measure  time.Duration
	load     load
	localIP  net.IP
	mhz      float64
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "forwarding:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		sfu      = flag.String("sfu", "inhouse", "signalling driver: "+driverNames())
		url      = flag.String("url", "ws://127.0.0.1:7000/", "the SFU's signalling URL")
		pid      = flag.Int("pid", 0, "`pid` of the SFU process whose CPU time is measured")
		spawn    = flag.String("spawn", "", "start this sfu-inhouse `binary` on -url's address (and the next port for media) instead of -pid")
		roomsArg = flag.String("rooms", "1,2,4", "room counts to run, in order")
		size     = flag.Int("room-size", 7, "participants per room")
		warmup   = flag.Duration("warmup", 3*time.Second, "time after everyone receives everyone before measuring")
		measure  = flag.Duration("duration", 10*time.Second, "measuring time per room count")
		videoPPS = flag.Int("video-pps", 30, "video packets per second per publisher")
		videoB   = flag.Int("video-bytes", 1000, "video payload size")
		audioPPS = flag.Int("audio-pps", 50, "audio packets per second per publisher")
		audioB   = flag.Int("audio-bytes", 100, "audio payload size")
		local    = flag.String("client-ip", "127.0.0.1", "the participants' address")
		mhz      = flag.Float64("cpu-mhz", 0, "core clock for the MHz figures (default: /proc/cpuinfo)")
		asJSON   = flag.Bool("json", false, "print the results as one JSON object instead of the table")
	)
	flag.Parse()
	cfg := config{
		driver: drivers[*sfu], url: *url, pid: *pid, roomSize: *size, warmup: *warmup, measure: *measure,
		load:    load{videoPPS: *videoPPS, audioPPS: *audioPPS, videoBytes: max(*videoB, 5+stampLen), audioBytes: max(*audioB, stampLen)},
		localIP: net.ParseIP(*local), mhz: *mhz,
	}
	if cfg.driver == nil {
		return fmt.Errorf("no driver %q (have %s)", *sfu, driverNames())
	}
	if cfg.localIP == nil {
		return fmt.Errorf("bad -client-ip %q", *local)
	}
	var rooms []int
	for _, f := range strings.Split(*roomsArg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("bad -rooms %q", *roomsArg)
		}
		rooms = append(rooms, n)
	}
	if cfg.mhz == 0 {
		cfg.mhz = cpuMHz()
	}
	if *spawn != "" {
		stop, pid, err := spawnInhouse(*spawn, *url)
		if err != nil {
			return err
		}
		defer stop()
		cfg.pid = pid
	}
	if cfg.pid == 0 {
		return errors.New("give the SFU's -pid, or -spawn")
	}

	base, err := baselineLatency(cfg)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	var results []result
	for _, n := range rooms {
		r, err := scenario(cfg, n)
		if err != nil {
			return fmt.Errorf("%d rooms: %w", n, err)
		}
		results = append(results, r)
	}
	if *asJSON {
		return printJSON(os.Stdout, cfg, base, results)
	}
	printTable(os.Stdout, cfg, base, results)
	return nil
}

type result struct {
	rooms, participants    int
	pubStreams, fwdStreams int
	seconds                float64
	sfuCPU, benchCPU       float64 // CPU seconds in the window
	sfuSys                 float64 // the part of sfuCPU spent in the kernel
	outPackets, expected   uint64
	p50, p95, p99          time.Duration
}

func scenario(cfg config, rooms int) (result, error) {
	api, err := newAPI(cfg.localIP)
	if err != nil {
		return result{}, err
	}
	var synths []*synth
	users := map[string]uint16{}
	for r := range rooms {
		for u := range cfg.roomSize {
			s := newSynth(uint16(len(synths)), fmt.Sprintf("r%d-u%d", r+1, u+1))
			users[s.user] = s.idx
			synths = append(synths, s)
		}
	}
	defer func() {
		var wg sync.WaitGroup
		for _, s := range synths {
			wg.Go(s.close)
		}
		wg.Wait()
		// Let the SFU tear the rooms down before the next count starts.
		time.Sleep(time.Second)
	}()

	// Join a few at a time, as participants arrive in a real call.
	sem := make(chan struct{}, 4)
	errs := make(chan error, len(synths))
	var wg sync.WaitGroup
	for i, s := range synths {
		room := strconv.Itoa(i/cfg.roomSize + 1)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			sess, err := cfg.driver.Join(ctx, cfg.url, s.participant(room, api, users))
			if err != nil {
				errs <- fmt.Errorf("%s: %w", s.user, err)
				return
			}
			s.sess = sess
			s.publish(cfg.load)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return result{}, err
	}

	want := 2 * (cfg.roomSize - 1)
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range synths {
		for {
			got := 0
			for _, n := range s.received() {
				if n > 0 {
					got++
				}
			}
			if got >= want {
				break
			}
			if time.Now().After(deadline) {
				return result{}, fmt.Errorf("%s receives %d of %d streams after 30 s", s.user, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(cfg.warmup)

	type snap struct {
		sent [][2]uint64
		recv []map[recvKey]uint64
		sfu  float64
		sys  float64
		self float64
		at   time.Time
	}
	take := func() (snap, error) {
		var sn snap
		for _, s := range synths {
			sn.sent = append(sn.sent, [2]uint64{s.sent[0].Load(), s.sent[1].Load()})
			sn.recv = append(sn.recv, s.received())
		}
		user, sys, err := cpuTimes(cfg.pid)
		if err != nil {
			return sn, err
		}
		sn.sfu, sn.sys = user+sys, sys
		sn.self, err = cpuSeconds(os.Getpid())
		sn.at = time.Now()
		return sn, err
	}
	for _, s := range synths {
		s.collecting.Store(true)
	}
	a, err := take()
	if err != nil {
		return result{}, err
	}
	time.Sleep(cfg.measure)
	b, err := take()
	if err != nil {
		return result{}, err
	}
	var lat []uint32
	for _, s := range synths {
		s.collecting.Store(false)
		s.mu.Lock()
		lat = append(lat, s.latUS...)
		s.mu.Unlock()
	}

	r := result{
		rooms: rooms, participants: len(synths),
		pubStreams: 2 * len(synths), fwdStreams: len(synths) * want,
		seconds: b.at.Sub(a.at).Seconds(), sfuCPU: b.sfu - a.sfu, sfuSys: b.sys - a.sys, benchCPU: b.self - a.self,
	}
	for i := range synths {
		for k, n := range b.recv[i] {
			r.outPackets += n - a.recv[i][k]
		}
		// Everyone else in the room should have received each packet sent.
		for kind := range 2 {
			r.expected += uint64(cfg.roomSize-1) * (b.sent[i][kind] - a.sent[i][kind])
		}
	}
	slices.Sort(lat)
	r.p50, r.p95, r.p99 = pct(lat, 0.50), pct(lat, 0.95), pct(lat, 0.99)
	return r, nil
}

func pct(sorted []uint32, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return time.Duration(sorted[int(q*float64(len(sorted)-1))]) * time.Microsecond
}

// spawnInhouse starts sfu-inhouse with signalling on url's address and
// media on the next port.
func spawnInhouse(bin, url string) (stop func(), pid int, err error) {
	hostport := strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, 0, fmt.Errorf("-url %q: %w", url, err)
	}
	p, _ := strconv.Atoi(port)
	cmd := exec.Command(bin, "-listen", hostport, "-udp", net.JoinHostPort(host, strconv.Itoa(p+1)), "-log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", hostport, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if i == 50 {
			cmd.Process.Kill()
			return nil, 0, fmt.Errorf("%s did not start listening on %s", bin, hostport)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}, cmd.Process.Pid, nil
}
