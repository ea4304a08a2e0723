package wire

// HandshakeRequest is the first frame a client sends on a connection. Its
// frame header and body keep this layout in every protocol version, so any
// client and server can at least agree that they disagree.
//
// Body v0:
//
//	protocol_min     uint16  lowest protocol version the client speaks
//	protocol_max     uint16  highest
//	client_id        string  names the client in logs, at most 255 bytes
//	client_software  string  "name/version" of the client library
type HandshakeRequest struct {
	ProtocolMin, ProtocolMax uint16
	ClientID                 string
	ClientSoftware           string
}

func (*HandshakeRequest) isRequest() {}

// APIKey returns APIHandshake.
func (*HandshakeRequest) APIKey() APIKey { return APIHandshake }

// AppendBody encodes the body.
func (r *HandshakeRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint16(dst, r.ProtocolMin)
	dst = be.AppendUint16(dst, r.ProtocolMax)
	dst = appendString(dst, r.ClientID)
	return appendString(dst, r.ClientSoftware)
}

// DecodeBody decodes the body.
func (r *HandshakeRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIHandshake, version, false)
	r.ProtocolMin = d.u16("protocol_min")
	r.ProtocolMax = d.u16("protocol_max")
	d.str("client_id", ClientIDBytesMax, &r.ClientID)
	d.str("client_software", ClientIDBytesMax, &r.ClientSoftware)
	return d.done()
}

// NegotiateProtocol picks the protocol version for a connection: the
// highest version both sides speak. With no overlap it returns an
// *ErrorResponse with UNSUPPORTED_VERSION naming both ranges.
func NegotiateProtocol(clientMin, clientMax uint16) (uint16, error) {
	v := min(clientMax, ProtocolVersionMax)
	if clientMin > clientMax || v < clientMin || v < ProtocolVersionMin {
		return 0, Errorf(ErrUnsupportedVersion, "client protocol versions %d..%d do not overlap the server's %d..%d",
			clientMin, clientMax, ProtocolVersionMin, ProtocolVersionMax)
	}
	return v, nil
}

// HandshakeResponse answers a handshake.
//
// Body v0:
//
//	protocol_version  uint16   the version chosen for this connection
//	node_id           int32    the answering node
//	cluster_id        string
//	server_version    string
//	frame_bytes_max   uint32   the largest request frame this server reads
//	apis              array of
//	  api_key           uint16
//	  min_version       uint16
//	  max_version       uint16
type HandshakeResponse struct {
	ProtocolVersion uint16
	NodeID          int32
	ClusterID       string
	ServerVersion   string
	FrameBytesMax   uint32
	// APIs lists every API the server serves (Name and Summary are not on
	// the wire).
	APIs []APIVersion
}

// ServerHandshake returns the response a server built on this package
// sends: every API of the table, with the given identity.
func ServerHandshake(protocolVersion uint16, nodeID int32, clusterID, serverVersion string, frameBytesMax uint32) *HandshakeResponse {
	apis := make([]APIVersion, len(apiTable))
	for i, a := range apiTable {
		apis[i] = APIVersion{Key: a.Key, Min: a.Min, Max: a.Max}
	}
	return &HandshakeResponse{ProtocolVersion: protocolVersion, NodeID: nodeID, ClusterID: clusterID,
		ServerVersion: serverVersion, FrameBytesMax: frameBytesMax, APIs: apis}
}

// PickVersion returns the highest version of key that both the server
// (this response) and this package speak; ok is false when there is none.
func (r *HandshakeResponse) PickVersion(key APIKey) (version uint16, ok bool) {
	min, max, known := key.Versions()
	if !known {
		return 0, false
	}
	for _, a := range r.APIs {
		if a.Key != key {
			continue
		}
		lo, hi := maxU16(min, a.Min), minU16(max, a.Max)
		if lo > hi {
			return 0, false
		}
		return hi, true
	}
	return 0, false
}

func minU16(a, b uint16) uint16 { return min(a, b) }
func maxU16(a, b uint16) uint16 { return max(a, b) }

func (*HandshakeResponse) isResponse() {}

// APIKey returns APIHandshake.
func (*HandshakeResponse) APIKey() APIKey { return APIHandshake }

// AppendBody encodes the body.
func (r *HandshakeResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint16(dst, r.ProtocolVersion)
	dst = be.AppendUint32(dst, uint32(r.NodeID))
	dst = appendString(dst, r.ClusterID)
	dst = appendString(dst, r.ServerVersion)
	dst = be.AppendUint32(dst, r.FrameBytesMax)
	dst = appendCount(dst, len(r.APIs))
	for _, a := range r.APIs {
		dst = be.AppendUint16(dst, uint16(a.Key))
		dst = be.AppendUint16(dst, a.Min)
		dst = be.AppendUint16(dst, a.Max)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *HandshakeResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIHandshake, version, true)
	r.ProtocolVersion = d.u16("protocol_version")
	r.NodeID = d.i32("node_id")
	d.str("cluster_id", ClusterIDBytesMax, &r.ClusterID)
	d.str("server_version", ClusterIDBytesMax, &r.ServerVersion)
	r.FrameBytesMax = d.u32("frame_bytes_max")
	n := d.count("apis", APIsMax, 6)
	r.APIs = grow(r.APIs, n)
	for i := range r.APIs {
		r.APIs[i] = APIVersion{Key: APIKey(d.u16("api_key")), Min: d.u16("min_version"), Max: d.u16("max_version")}
	}
	return d.done()
}
