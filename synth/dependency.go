package main

// The dependency descriptor (the AV1 RTP specification's header extension,
// which Chrome sends with VP9 SVC where it is negotiated): each layer frame
// names a template of the stream's structure, which says its spatial and
// temporal layer, the decode targets it serves, the frames it refers to and
// the chains that protect each target. An SFU that has it (LiveKit) picks
// the frames a receiver's decode target needs from it rather than from the
// codec's payload. The structure here is L<n>T3_KEY's, as vp9SVCStream sends
// it: per spatial layer a key-picture frame, then temporal layers 0, 2, 1, 2,
// five templates; decode target (s, t) is protected by chain s.

// keySVCKinds are a layer's frames by their place after a key picture, in
// the order of their templates (by temporal layer): the key picture's, then
// temporal layer 0's, 1's (two after it), and 2's (one and three after).
const (
	kindKey = iota
	kindT0
	kindT1
	kindT2First
	kindT2Last
	kindsPerLayer
)

// kindAfterKey is the kind of a frame since pictures after a key picture.
func kindAfterKey(since int) int {
	if since == 0 {
		return kindKey
	}
	return [4]int{kindT0, kindT2First, kindT1, kindT2Last}[since%4]
}

// ddTemplate is one frame template of the structure.
type ddTemplate struct {
	spatial, temporal int
	dtis              []byte // per decode target: 0 not needed, 1 discardable, 2 switch, 3 required
	fdiffs            []int  // the frames referred to, by frame numbers back
	chains            []int  // per chain, frame numbers back to its previous frame (0: it starts here)
}

const (
	dtiNone, dtiDiscardable, dtiSwitch = 0, 1, 2
	temporalLayers                     = 3
)

// keySVCTemplates are the templates of L<n>T3_KEY, n frames a picture.
func keySVCTemplates(n int) []ddTemplate {
	var out []ddTemplate
	for s := range n {
		for kind := range kindsPerLayer {
			t := ddTemplate{spatial: s, dtis: make([]byte, n*temporalLayers), chains: make([]int, n)}
			// pictures since the layer's last frame of temporal layer 0 (or key)
			since := map[int]int{kindKey: 0, kindT0: 4, kindT2First: 1, kindT1: 2, kindT2Last: 3}[kind]
			t.temporal = map[int]int{kindKey: 0, kindT0: 0, kindT1: 1, kindT2First: 2, kindT2Last: 2}[kind]
			for c := range n {
				switch {
				case kind == kindKey && c < s:
					t.chains[c] = s - c // the layer below in this picture
				case kind == kindKey:
					t.chains[c] = min(s, 1) // the key frame below, or the chain starts
				case kind == kindT0 && c < s:
					t.chains[c] = s - c // that layer's frame of temporal layer 0 in this picture
				default:
					t.chains[c] = since*n + s - c // that layer's in the picture of temporal layer 0
				}
			}
			switch kind {
			case kindKey:
				if s > 0 {
					t.fdiffs = []int{1}
				}
			case kindT0:
				t.fdiffs = []int{4 * n}
			case kindT1:
				t.fdiffs = []int{2 * n}
			default:
				t.fdiffs = []int{n}
			}
			for ds := range n {
				for dt := range temporalLayers {
					t.dtis[ds*temporalLayers+dt] = dti(kind, s, t.temporal, ds, dt)
				}
			}
			out = append(out, t)
		}
	}
	return out
}

// dti is what a frame of kind in layer (s, t) is to decode target (ds, dt):
// every frame but the top temporal layer's is a point to switch at (no
// frame refers past one of a lower temporal layer: U in the descriptor).
func dti(kind, s, t, ds, dt int) byte {
	switch {
	case kind == kindKey && ds >= s:
		return dtiSwitch
	case kind == kindKey || ds != s || dt < t:
		return dtiNone
	case t == temporalLayers-1:
		return dtiDiscardable
	}
	return dtiSwitch
}

// bitWriter appends bits most significant first.
type bitWriter struct {
	b []byte
	n int // bits written
}

func (w *bitWriter) put(v uint, bits int) {
	for i := bits - 1; i >= 0; i-- {
		if w.n%8 == 0 {
			w.b = append(w.b, 0)
		}
		w.b[len(w.b)-1] |= byte(v>>i&1) << (7 - w.n%8)
		w.n++
	}
}

// putNS writes v of n values in the specification's non-symmetric code.
func (w *bitWriter) putNS(v, n uint) {
	bits := 0
	for x := n; x != 0; x >>= 1 {
		bits++
	}
	m := uint(1)<<bits - n
	if v < m {
		w.put(v, bits-1)
		return
	}
	w.put((v+m)>>1, bits-1)
	w.put((v+m)&1, 1)
}

// dependencyDescriptor is a layer frame's descriptor: which frame it is
// (frame number), whether the packet begins or ends it, its template, and
// with structure the whole structure (a key picture's first packet).
func dependencyDescriptor(buf []byte, templates []ddTemplate, template int, frame uint16, begins, ends bool,
	sizes [][2]int, structure bool) []byte {
	w := bitWriter{b: buf[:0]}
	w.put(b2u(begins), 1)
	w.put(b2u(ends), 1)
	w.put(uint(template), 6) // template_id_offset is 0
	w.put(uint(frame), 16)
	if !structure {
		return w.b
	}
	w.put(1, 1) // template_dependency_structure_present_flag
	w.put(0, 4) // active decode targets, custom DTIs, fdiffs and chains: none
	dts := len(templates[0].dtis)
	w.put(0, 6) // template_id_offset
	w.put(uint(dts-1), 5)
	for i, t := range templates { // next_layer_idc: the same layer, a temporal layer up, a spatial one, the end
		switch {
		case i == len(templates)-1:
			w.put(3, 2)
		case templates[i+1].spatial > t.spatial:
			w.put(2, 2)
		case templates[i+1].temporal > t.temporal:
			w.put(1, 2)
		default:
			w.put(0, 2)
		}
	}
	for _, t := range templates {
		for _, d := range t.dtis {
			w.put(uint(d), 2)
		}
	}
	for _, t := range templates {
		for _, f := range t.fdiffs {
			w.put(1, 1)
			w.put(uint(f-1), 4)
		}
		w.put(0, 1)
	}
	chains := len(templates[0].chains)
	w.putNS(uint(chains), uint(dts+1))
	for dt := range dts {
		w.putNS(uint(dt/temporalLayers), uint(chains)) // target (s, t) by chain s
	}
	for _, t := range templates {
		for _, c := range t.chains {
			w.put(uint(c), 4)
		}
	}
	w.put(1, 1) // resolutions_present_flag
	for _, s := range sizes {
		w.put(uint(s[0]-1), 16)
		w.put(uint(s[1]-1), 16)
	}
	return w.b
}

func b2u(b bool) uint {
	if b {
		return 1
	}
	return 0
}
