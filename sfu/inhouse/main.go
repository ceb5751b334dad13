// Command sfu-inhouse is sfubench's own SFU.
//
//	sfu-inhouse -listen 127.0.1.1:7000 -udp 127.0.1.1:7001
//
// Signalling (WebSocket), /metrics and /healthz are served on -listen; all
// media of all participants goes through the one UDP socket -udp.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	runtimepprof "runtime/pprof"
	"strings"
	"syscall"
	"time"

	"sfubench/sfu/inhouse/internal/sfu"
	"sfubench/sfu/inhouse/internal/udpbatch"
)

// Version is the SFU's version; sfu-configs/inhouse/sfu.toml pins the same.
const Version = "0.1.0"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sfu-inhouse:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		listen   = flag.String("listen", "127.0.0.1:7000", "`address` for WebSocket signalling, /metrics and /healthz")
		udp      = flag.String("udp", "127.0.0.1:7001", "`address` of the UDP socket all media uses; ICE offers its IP as the only candidate")
		announce = flag.String("announce", "", "`IP` to put in the ICE candidate instead of -udp's (1:1 NAT)")
		maxPeers = flag.Int("max-room-peers", 64, "participants allowed in one room")
		maxRooms = flag.Int("max-rooms", 1000, "rooms allowed at once")
		maxConns = flag.Int("max-connections", 4096, "signalling connections allowed at once")
		rate     = flag.Float64("message-rate", 20, "signalling messages a connection may send per second on average")
		burst    = flag.Int("message-burst", 50, "signalling messages a connection may send at once")
		origins  = flag.String("allow-origins", "", "comma-separated page origins (scheme://host:port, host:port or a bare host) allowed to open sessions from a browser, or *; same-host pages and non-browser clients always are")
		replace  = flag.Bool("replace-sessions", false, "let a second join of a live user id take over its session (default: refuse it)")
		dropFrom = flag.String("drop-video-from", "", "a deliberate fault: never forward the video this `user` publishes")
		maxMsg   = flag.Int64("max-message", 1<<20, "largest signalling message in `bytes`")
		join     = flag.Duration("join-timeout", 10*time.Second, "time a new WebSocket has to join")
		connect  = flag.Duration("connect-timeout", 20*time.Second, "time a participant has to establish media")
		pong     = flag.Duration("pong-timeout", 30*time.Second, "signalling silence after which a participant is dropped")
		iceFail  = flag.Duration("ice-failed-timeout", 10*time.Second, "time a disconnected participant has to come back")
		withProf = flag.Bool("pprof", false, "serve /debug/pprof/ on -listen, to clients on loopback or private addresses only")
		gso      = flag.Bool("gso", true, "send each subscriber's run of equal-sized datagrams as one UDP GSO message (false: a message per datagram)")
		cpuProf  = flag.String("cpu-profile", "", "write a CPU profile of the server's whole life to this `file` when it stops (make bench: where the CPU goes)")
		logLevel = flag.String("log-level", "info", "debug, info, warn or error")
		version  = flag.Bool("version", false, "print the version and exit")
	)
	flag.Parse()
	if *version {
		fmt.Println("sfu-inhouse", Version)
		return nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *cpuProf != "" {
		stop, err := profileCPU(*cpuProf)
		if err != nil {
			return err
		}
		defer stop()
	}

	conn, err := udpbatch.Listen(*udp)
	if err != nil {
		return err
	}
	if !*gso {
		conn.DisableGSO()
	}
	var allowed []string
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, o)
		}
	}
	s, err := sfu.New(sfu.Config{
		UDP: conn, Announce: *announce,
		MaxRoomPeers: *maxPeers, MaxRooms: *maxRooms, MaxPeers: *maxConns, MaxMessageBytes: *maxMsg,
		MessageRate: *rate, MessageBurst: *burst, AllowOrigins: allowed, ReplaceSessions: *replace, DropVideoFrom: *dropFrom,
		JoinTimeout: *join, ConnectTimeout: *connect, PongTimeout: *pong, ICEFailedTimeout: *iceFail,
		Log: log,
	})
	if err != nil {
		conn.Close()
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		s.Close()
		return err
	}
	handler := s.Handler()
	if *withProf {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.Handle("/debug/pprof/", sfu.Private(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", sfu.Private(http.HandlerFunc(pprof.Profile)))
		handler = mux
	}
	// No read or write deadline: the signalling's WebSockets live as long as their participants; a
	// kept-alive connection that carries nothing is let go.
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second,
		MaxHeaderBytes: 1 << 14}
	log.Info("sfu-inhouse started", "version", Version, "listen", ln.Addr().String(), "udp", conn.LocalAddr().String())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		log.Info("shutting down")
	}
	// The engine sends SIGKILL 5 s after SIGTERM: end the sessions first
	// so clients see a close rather than a timeout.
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// profileCPU starts a CPU profile into path; the returned function ends it.
func profileCPU(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := runtimepprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		runtimepprof.StopCPUProfile()
		f.Close()
	}, nil
}
