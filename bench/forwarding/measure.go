package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pion/webrtc/v4"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture sfubench runs on.
const clockTicks = 100

// cpuSeconds is the user+system CPU time of a whole process, all threads.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; fields count from after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(utime+stime) / clockTicks, nil
}

// cpuMHz is the first core's clock as the kernel reports it, or 0.
func cpuMHz() float64 {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "cpu MHz" {
			mhz, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return mhz
		}
	}
	return 0
}

// baselineLatency is the one-way latency of the same streams between two
// pion peers connected directly, no SFU: what the client stacks alone add.
func baselineLatency(cfg config) (time.Duration, error) {
	api, err := newAPI(cfg.localIP)
	if err != nil {
		return 0, err
	}
	pub, sub := newSynth(0, "base-pub"), newSynth(1, "base-sub")
	ppc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return 0, err
	}
	spc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		ppc.Close()
		return 0, err
	}
	// The synths' readers end when the connections close.
	defer func() {
		ppc.Close()
		spc.Close()
		pub.close()
		sub.close()
	}()
	for _, t := range []webrtc.TrackLocal{pub.audio, pub.video} {
		s, err := ppc.AddTrack(t)
		if err != nil {
			return 0, err
		}
		pub.readRTCP(s)
	}
	spc.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { sub.receive(0, t) })
	if err := connect(ppc, spc); err != nil {
		return 0, err
	}
	pub.publish(cfg.load)
	deadline := time.Now().Add(10 * time.Second)
	for len(sub.received()) < 2 {
		if time.Now().After(deadline) {
			return 0, errors.New("no media between two direct peers")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sub.collecting.Store(true)
	time.Sleep(3 * time.Second)
	sub.collecting.Store(false)
	sub.mu.Lock()
	lat := slices.Clone(sub.latUS)
	sub.mu.Unlock()
	slices.Sort(lat)
	return pct(lat, 0.5), nil
}

func connect(offerer, answerer *webrtc.PeerConnection) error {
	offer, err := offerer.CreateOffer(nil)
	if err != nil {
		return err
	}
	done := webrtc.GatheringCompletePromise(offerer)
	if err := offerer.SetLocalDescription(offer); err != nil {
		return err
	}
	<-done
	if err := answerer.SetRemoteDescription(*offerer.LocalDescription()); err != nil {
		return err
	}
	answer, err := answerer.CreateAnswer(nil)
	if err != nil {
		return err
	}
	done = webrtc.GatheringCompletePromise(answerer)
	if err := answerer.SetLocalDescription(answer); err != nil {
		return err
	}
	<-done
	return offerer.SetRemoteDescription(*answerer.LocalDescription())
}

func printTable(w io.Writer, cfg config, base time.Duration, rs []result) {
	fmt.Fprintf(w, "forwarding benchmark: rooms of %d, each publishing %d B video at %d pps + %d B audio at %d pps; %v measured per row; %.0f MHz cores\n",
		cfg.roomSize, cfg.load.videoBytes, cfg.load.videoPPS, cfg.load.audioBytes, cfg.load.audioPPS, cfg.measure, cfg.mhz)
	fmt.Fprintf(w, "a forwarded stream is one published track delivered to one subscriber; latency is publisher→subscriber one way, \"added\" subtracts the direct pion↔pion median (%.2f ms)\n\n",
		ms(base))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rooms\tparticipants\tpublished\tforwarded\tSFU CPU %\tCPU ms per fwd stream-s\tMHz per pub stream\tMHz per fwd stream\tout pkt/s\tloss %\tp50 ms\tp95 ms\tp99 ms\tadded p50 ms\tbench CPU %\t")
	for _, r := range rs {
		util := r.sfuCPU / r.seconds
		loss := 0.0
		if r.expected > 0 && r.outPackets < r.expected {
			loss = 100 * float64(r.expected-r.outPackets) / float64(r.expected)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t%.3f\t%.2f\t%.2f\t%.0f\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t\n",
			r.rooms, r.participants, r.pubStreams, r.fwdStreams, 100*util,
			1000*r.sfuCPU/(float64(r.fwdStreams)*r.seconds),
			util*cfg.mhz/float64(r.pubStreams), util*cfg.mhz/float64(r.fwdStreams),
			float64(r.outPackets)/r.seconds, loss, ms(r.p50), ms(r.p95), ms(r.p99), ms(r.p50-base),
			100*r.benchCPU/r.seconds)
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
