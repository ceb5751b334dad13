// Command sfubench-synth is sfubench's synthetic participants: many pion
// participants in one process, each joining its room through the SFU's own
// signalling (a Driver per adapter), publishing the frame-coded clip the
// media step pre-encoded (VP8, H.264, VP9 or AV1, and Opus, paced in real
// time) and receiving everyone else with the feedback a browser sends (NACK,
// receiver reports, transport-wide congestion control). To the engine each one is a page:
// it reports over the page contract (docs/contracts.md).
//
// The engine starts it and sends it one JSON command per line on stdin:
//
//	{"cmd": "join", "user": "r2u1", "room": 2, "params": {"server": "ws://..."}, "receive_layer": "smallest"}
//	{"cmd": "leave", "user": "r2u1"}
//
// params are the adapter's client parameters, the same a page gets;
// receive_layer is the simulcast layer it asks for ("largest", the SFU's
// choice, when absent); "publish": false makes it a viewer, which sends no
// media and receives every publisher. End of input leaves every room and exits. With
// -listen it is started before its run instead (a cloud's generators, on
// the grid's hosts) and takes the same commands over HTTP, one per POST
// /command, each join carrying the engine's /collect URL; it runs until
// SIGTERM.
package main

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"sfubench/sfu/inhouse/client"
)

// epoch is the one clock every time here is read on.
var epoch = time.Now()

// The run's secret comes in this environment variable (never a flag: a
// command line is public) and goes with every request in this header, as
// sfubench/agent.py names them.
const (
	tokenEnv    = "SFUBENCH_RUN_TOKEN"
	tokenHeader = "X-Sfubench-Token"
)

// readBuffer is each participant's socket receive buffer: a megabyte, about
// what a browser asks for, takes a second of a participant's video at once.
const readBuffer = 1 << 20

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sfubench-synth:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		driverName = flag.String("driver", "", "the SFU's signalling: "+driverNames())
		collect    = flag.String("collect", "", "the engine's /collect `URL`")
		id         = flag.String("id", "synth-1", "this generator's name in the engine's records")
		video      = flag.String("video", "", "the clip's video `files` (VP8, VP9 or AV1 in .ivf, H.264 in .h264), one per simulcast layer, smallest picture first, comma-separated")
		audio      = flag.String("audio", "", "the clip's Opus `Ogg` file")
		svc        = flag.Bool("svc", false, "the -video files are the spatial layers of one VP9 SVC stream (svcenc's), published as one")
		fps        = flag.Int("fps", 15, "the clip's frame rate")
		local      = flag.String("client-ip", "127.0.0.1", "the participants' own `address`")
		rtt        = flag.Float64("rtt-ms", 0, "the round trip of the participants' link in `ms`, from which their DTLS handshakes time retransmissions as Chrome's do")
		listen     = flag.String("listen", "", "take commands over HTTP at `address:port` (POST /command) instead of stdin")
	)
	flag.Parse()
	defer startProfile()()
	// Fewer collections: a send that allocates while the collector marks is
	// made to help it, and that shows as pacing error. Memory is cheap here.
	debug.SetGCPercent(400)
	driver := drivers[*driverName]
	driverInUse = *driverName
	if driver == nil {
		return fmt.Errorf("no driver %q (have %s)", *driverName, driverNames())
	}
	ip := net.ParseIP(*local)
	if ip == nil {
		return fmt.Errorf("bad -client-ip %q", *local)
	}
	if (*collect == "" && *listen == "") || *video == "" || *audio == "" || *fps < 1 || *fps > 120 {
		return fmt.Errorf("-collect (or -listen), -video and -audio are needed, and -fps within 1..120")
	}
	token := os.Getenv(tokenEnv)
	if token == "" {
		return fmt.Errorf("%s must hold the run's token", tokenEnv)
	}
	c, err := loadClip(strings.Split(*video, ","), *audio, *svc)
	if err != nil {
		return err
	}
	if n := len(c.layers); n > len(client.Rids) {
		return fmt.Errorf("-video names %d layers: at most %d", n, len(client.Rids))
	} else if n > 1 && !layeredDrivers[*driverName] {
		return fmt.Errorf("-video names %d layers: the %s driver publishes one", n, *driverName)
	}
	options := client.APIOptions{IPFilter: func(a net.IP) bool { return a.Equal(ip) }, ReadBuffer: readBuffer,
		Simulcast: len(c.layers) > 1 && !c.svc, Dependencies: c.svc, LinkRTT: time.Duration(*rtt * float64(time.Millisecond))}
	if _, err := client.NewAPI(options); err != nil {
		return err
	}
	g := &generator{id: *id, token: token, collect: *collect, http: &http.Client{Timeout: postTimeout}, driver: driver,
		driverName: *driverName, apiOptions: options, clip: c, fps: *fps, members: map[string]*member{},
		reported: map[*member]string{}, windows: map[int]*window{}}
	stop := make(chan struct{})
	go g.report(stop)

	// SIGTERM from the engine's teardown leaves as end of input does.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	lines := make(chan []byte)
	if *listen != "" {
		srv, err := listenForCommands(*listen, token, lines)
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Fprintf(os.Stderr, "sfubench-synth: taking commands at http://%s/command\n", *listen)
	} else {
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				lines <- append([]byte(nil), sc.Bytes()...)
			}
			close(lines)
		}()
	}
	defer func() {
		close(stop)
		g.closeAll()
	}()
	for {
		select {
		case <-sig:
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			var cmd struct {
				Cmd     string            `json:"cmd"`
				User    string            `json:"user"`
				Room    int               `json:"room"`
				Params  map[string]string `json:"params"`
				Collect string            `json:"collect"`
				Layer   string            `json:"receive_layer"`
				Publish *bool             `json:"publish"`
				Follow  bool              `json:"follow"`
			}
			if err := json.Unmarshal(line, &cmd); err != nil || cmd.User == "" {
				fmt.Fprintf(os.Stderr, "sfubench-synth: ignoring %q\n", line)
				continue
			}
			switch cmd.Cmd {
			case "join":
				if cmd.Collect != "" {
					g.setCollect(cmd.Collect)
				}
				m := newMember(cmd.User, cmd.Room, cmd.Params, cmd.Layer, c, *fps)
				m.watches = cmd.Publish != nil && !*cmd.Publish
				if cmd.Follow { // its first frames are the time it took to join
					m.follow(true)
				}
				g.add(m)
			case "leave":
				g.remove(cmd.User)
			default:
				fmt.Fprintf(os.Stderr, "sfubench-synth: unknown command %q\n", cmd.Cmd)
			}
		}
	}
}

// listenForCommands serves POST /command: each body is one command, handed
// to the same loop stdin's lines go to; a request without the run's token is
// refused before its body is read.
func listenForCommands(addr, token string, lines chan<- []byte) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/command", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(tokenHeader)), []byte(token)) != 1 {
			w.Header().Set("Connection", "close")
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST a command", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err != nil || !json.Valid(body) {
			http.Error(w, "a command is one JSON object", http.StatusBadRequest)
			return
		}
		lines <- body
		w.WriteHeader(http.StatusNoContent)
	})
	// A command is a small POST: one that takes longer to arrive, or a connection left idle, is not
	// the engine's, and holds nothing for long.
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second,
		MaxHeaderBytes: 1 << 14}
	go srv.Serve(ln)
	return srv, nil
}
