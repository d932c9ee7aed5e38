-- psp.lua: Wireshark/tshark dissector for PSP, the layer-2 Packet Security Protocol of psp
-- (docs/PROTOCOL.md; unrelated to Google's "PSP Security Protocol").
--
-- Registers for EtherType 0x1982 (the raw uplink) and for UDP port 5198 (psp-gateway's UDP
-- uplink, where the whole PSP frame, Ethernet header included, is the datagram payload).
--
-- Load it:   tshark -X lua_script:psp-gateway/contrib/wireshark/psp.lua -r capture.pcap
--   or copy it to ~/.local/lib/wireshark/plugins/ (Wireshark 4.0's personal Lua plugin folder).
-- Preferences (Edit > Preferences > Protocols > PSP, or tshark -o NAME:VALUE):
--   psp.suite     the cipher suite of the captured session (default bf-cbc-hmac-sha1, the
--                 gateway's default). It fixes the ICV length (none 0; aes128-gcm, aes256-gcm,
--                 chacha20-poly1305 16; null-hmac-sha1, bf-cbc-hmac-sha1, scramble-hmac-sha1 20),
--                 which is not on the wire.
--   psp.udp_port  the UDP uplink port (default 5198; 0 turns the UDP registration off).
--
-- Written for the Lua 5.2 of Debian 12's Wireshark 4.0: bit operations use the `bit` library.
-- A frame that is too short or malformed gets an expert-info mark; the dissector never raises
-- a Lua error for it.

local PSP_ETHERTYPE = 0x1982
local DEFAULT_UDP_PORT = 5198
local ETH_HEADER_LEN = 14
local SIGNATURE_LEN = 64
local MAX_PAD = 64

local psp = Proto("psp", "PSP (layer-2 Packet Security Protocol)")

-- Suites in the order of docs/SUITES.md; the enum value is the index.
local SUITES = {
    { name = "none", icv = 0 },
    { name = "null-hmac-sha1", icv = 20 },
    { name = "bf-cbc-hmac-sha1", icv = 20 },
    { name = "aes128-gcm", icv = 16 },
    { name = "aes256-gcm", icv = 16 },
    { name = "chacha20-poly1305", icv = 16 },
    { name = "scramble-hmac-sha1", icv = 20 },
}
local DEFAULT_SUITE = 3 -- bf-cbc-hmac-sha1, `[defaults] suite` of psp-gateway

local suite_enum = {}
for i, s in ipairs(SUITES) do
    suite_enum[i] = { i, s.name, i }
end

psp.prefs.suite = Pref.enum("Cipher suite", DEFAULT_SUITE,
    "The suite of the captured session; it fixes the ICV length, which is not on the wire",
    suite_enum, false)
psp.prefs.udp_port = Pref.uint("UDP uplink port", DEFAULT_UDP_PORT,
    "UDP port of psp-gateway's UDP uplink (0: do not register for UDP)")

-- docs/PROTOCOL.md §1.3 (sub-protocols) plus the EtherTypes seen most.
local PROTO_NAMES = {
    [0x0001] = "Session establishment",
    [0x0002] = "Control / feedback",
    [0x0003] = "Dummy",
    [0x0004] = "Key exchange",
    [0x0005] = "Normalized payload",
    [0x0006] = "Group copy",
    [0x0007] = "Membership (certificate, revocation list, state)",
    [0x0800] = "IPv4",
    [0x0806] = "ARP",
    [0x86dd] = "IPv6",
    [0x8100] = "802.1Q",
}
local SUB_SESSION = 0x0001
local SUB_KEY_EXCHANGE = 0x0004
local FIRST_ETHERTYPE = 0x0600

-- docs/SESSIONS.md, "Messages".
local SEP_TYPES = {
    [0x01] = "Request",
    [0x02] = "Accept",
    [0x03] = "Reject",
    [0x04] = "Share",
    [0x05] = "ShareReply",
    [0x06] = "Nonce",
    [0x07] = "NonceReply",
    [0x08] = "Confirm",
    [0x09] = "ConfirmAck",
}
local SEP_HEADER_LEN = 18

local f = {
    dst = ProtoField.ether("psp.dst", "Destination"),
    src = ProtoField.ether("psp.src", "Source"),
    ethertype = ProtoField.uint16("psp.ethertype", "EtherType", base.HEX),
    version = ProtoField.uint8("psp.version", "Version", base.DEC, nil, 0xe0),
    flags = ProtoField.uint8("psp.flags", "Flags", base.HEX, nil, 0x1f),
    flag_secnum = ProtoField.bool("psp.flags.secnum", "Security number", 8, nil, 0x10),
    flag_ts = ProtoField.bool("psp.flags.ts", "Timestamp", 8, nil, 0x08),
    flag_reserved = ProtoField.bool("psp.flags.reserved", "Reserved", 8, nil, 0x04),
    flag_sig = ProtoField.bool("psp.flags.sig", "Digital signature", 8, nil, 0x02),
    flag_enc = ProtoField.bool("psp.flags.enc", "Encryption", 8, nil, 0x01),
    seq = ProtoField.uint32("psp.seq", "Sequence number", base.DEC),
    secnum = ProtoField.uint24("psp.secnum", "Security number", base.HEX),
    timestamp = ProtoField.uint32("psp.timestamp", "Timestamp (ms mod 2^32)", base.DEC),
    section = ProtoField.bytes("psp.section", "Section"),
    section_len = ProtoField.uint32("psp.section_len", "Section length", base.DEC),
    encrypted = ProtoField.bool("psp.encrypted", "Section encrypted"),
    proto = ProtoField.uint16("psp.proto", "Protocol type", base.HEX, PROTO_NAMES),
    subproto = ProtoField.string("psp.subproto", "Sub-protocol"),
    pad = ProtoField.uint8("psp.pad", "Pad size", base.DEC),
    data = ProtoField.bytes("psp.data", "Data"),
    data_len = ProtoField.uint32("psp.data_len", "Data length", base.DEC),
    padding = ProtoField.bytes("psp.padding", "Padding"),
    sep_version = ProtoField.uint8("psp.sep.version", "Handshake version", base.DEC),
    sep_type = ProtoField.uint8("psp.sep.type", "Handshake message", base.HEX, SEP_TYPES),
    sep_initiator = ProtoField.uint64("psp.sep.initiator", "Initiator id", base.HEX),
    sep_responder = ProtoField.uint64("psp.sep.responder", "Responder id", base.HEX),
    sep_body = ProtoField.bytes("psp.sep.body", "Message body"),
    icv = ProtoField.bytes("psp.icv", "ICV"),
    icv_len = ProtoField.uint8("psp.icv_len", "ICV length (from the psp.suite preference)",
        base.DEC),
    signature = ProtoField.bytes("psp.signature", "Ed25519 signature"),
}
psp.fields = {
    f.dst, f.src, f.ethertype, f.version, f.flags, f.flag_secnum, f.flag_ts, f.flag_reserved,
    f.flag_sig, f.flag_enc, f.seq, f.secnum, f.timestamp, f.section, f.section_len, f.encrypted,
    f.proto, f.subproto, f.pad, f.data, f.data_len, f.padding, f.sep_version, f.sep_type,
    f.sep_initiator, f.sep_responder, f.sep_body, f.icv, f.icv_len, f.signature,
}

local ex = {
    truncated = ProtoExpert.new("psp.truncated", "Truncated PSP frame",
        expert.group.MALFORMED, expert.severity.ERROR),
    version = ProtoExpert.new("psp.bad_version", "Version is not 0 (receivers drop it)",
        expert.group.PROTOCOL, expert.severity.WARN),
    reserved = ProtoExpert.new("psp.reserved_flag", "Reserved flag set (receivers drop it)",
        expert.group.PROTOCOL, expert.severity.WARN),
    padding = ProtoExpert.new("psp.bad_padding", "Pad size beyond the section or above 64",
        expert.group.MALFORMED, expert.severity.ERROR),
    not_psp = ProtoExpert.new("psp.not_psp", "EtherType inside the UDP payload is not 0x1982",
        expert.group.MALFORMED, expert.severity.ERROR),
}
psp.experts = { ex.truncated, ex.version, ex.reserved, ex.padding, ex.not_psp }

local function icv_len()
    local s = SUITES[psp.prefs.suite] or SUITES[DEFAULT_SUITE]
    return s.icv, s.name
end

local function proto_name(p)
    local n = PROTO_NAMES[p]
    if n then
        return n
    end
    if p < FIRST_ETHERTYPE then
        return string.format("unknown sub-protocol 0x%04x", p)
    end
    return string.format("EtherType 0x%04x", p)
end

-- The session-establishment / key-exchange payload (docs/SESSIONS.md): 18-byte header.
local function dissect_handshake(tvb, tree)
    local n = tvb:len()
    if n < 2 then
        tree:add_proto_expert_info(ex.truncated, "Handshake message shorter than 2 bytes")
        return nil
    end
    tree:add(f.sep_version, tvb(0, 1))
    local t = tvb(1, 1):uint()
    tree:add(f.sep_type, tvb(1, 1))
    if n >= SEP_HEADER_LEN then
        tree:add(f.sep_initiator, tvb(2, 8))
        tree:add(f.sep_responder, tvb(10, 8))
        if n > SEP_HEADER_LEN then
            tree:add(f.sep_body, tvb(SEP_HEADER_LEN))
        end
    else
        tree:add_proto_expert_info(ex.truncated, "Handshake header shorter than 18 bytes")
    end
    return SEP_TYPES[t] or string.format("message 0x%02x", t)
end

-- The clear section: protocol type, pad size, data, padding (PROTOCOL.md §1.2).
local function dissect_clear_section(tvb, pinfo, tree, root)
    local s = tvb:len()
    local proto = tvb(0, 2):uint()
    local pad = tvb(2, 1):uint()
    local name = proto_name(proto)
    tree:add(f.proto, tvb(0, 2))
    tree:add(f.subproto, tvb(0, 2), name):set_generated()
    local pad_item = tree:add(f.pad, tvb(2, 1))
    local data_len = s - 3 - pad
    if pad > MAX_PAD or data_len < 0 then
        pad_item:add_proto_expert_info(ex.padding)
        data_len = s - 3
        pad = 0
    end
    tree:add(f.data_len, data_len):set_generated()
    local info = name
    if data_len > 0 then
        local data = tvb(3, data_len)
        tree:add(f.data, data)
        if proto == SUB_SESSION or proto == SUB_KEY_EXCHANGE then
            local msg = dissect_handshake(data:tvb(), tree)
            if msg then
                info = info .. " " .. msg
            end
        elseif proto >= FIRST_ETHERTYPE then
            -- Hand the inner payload to Wireshark's own dissector (IPv4, ARP, ...).
            local table = DissectorTable.get("ethertype")
            pcall(function()
                table:try(proto, data:tvb(), pinfo, root)
            end)
        end
    elseif proto == SUB_SESSION or proto == SUB_KEY_EXCHANGE then
        tree:add_proto_expert_info(ex.truncated, "Empty handshake message")
    end
    if pad > 0 then
        tree:add(f.padding, tvb(3 + data_len, pad))
    end
    return info
end

-- `tvb` starts at the version/flags byte. Returns the number of bytes consumed.
local function dissect_psp(tvb, pinfo, root, tree)
    local len = tvb:len()
    pinfo.cols.protocol = "PSP"
    if len < 5 then
        tree:add_proto_expert_info(ex.truncated, "Shorter than the 5-byte PSP header")
        if len >= 1 then
            tree:add(f.version, tvb(0, 1))
            tree:add(f.flags, tvb(0, 1))
        end
        pinfo.cols.info = "PSP, truncated"
        return len
    end
    local vf = tvb(0, 1):uint()
    local version = bit.rshift(bit.band(vf, 0xe0), 5)
    local v_item = tree:add(f.version, tvb(0, 1))
    if version ~= 0 then
        v_item:add_proto_expert_info(ex.version)
    end
    local fl = tree:add(f.flags, tvb(0, 1))
    fl:add(f.flag_secnum, tvb(0, 1))
    fl:add(f.flag_ts, tvb(0, 1))
    local r_item = fl:add(f.flag_reserved, tvb(0, 1))
    if bit.band(vf, 0x04) ~= 0 then
        r_item:add_proto_expert_info(ex.reserved)
    end
    fl:add(f.flag_sig, tvb(0, 1))
    fl:add(f.flag_enc, tvb(0, 1))
    local seq = tvb(1, 4):uint()
    tree:add(f.seq, tvb(1, 4))

    local has_secnum = bit.band(vf, 0x10) ~= 0
    local has_ts = bit.band(vf, 0x08) ~= 0
    local signed = bit.band(vf, 0x02) ~= 0
    local encrypted = bit.band(vf, 0x01) ~= 0
    local off = 5
    if has_secnum then
        if len < off + 3 then
            tree:add_proto_expert_info(ex.truncated, "Truncated in the security number")
            pinfo.cols.info = "PSP, truncated"
            return len
        end
        tree:add(f.secnum, tvb(off, 3))
        off = off + 3
    end
    if has_ts then
        if len < off + 4 then
            tree:add_proto_expert_info(ex.truncated, "Truncated in the timestamp")
            pinfo.cols.info = "PSP, truncated"
            return len
        end
        tree:add(f.timestamp, tvb(off, 4))
        off = off + 4
    end

    local icv, suite = icv_len()
    local trailer = icv + (signed and SIGNATURE_LEN or 0)
    local section_len = len - off - trailer
    tree:add(f.icv_len, icv):set_generated():append_text(" (" .. suite .. ")")
    if section_len < 3 then
        tree:add_proto_expert_info(ex.truncated, string.format(
            "%d bytes after the Ethernet header cannot hold the PSP header (%d), " ..
            "a 3-byte section header, the ICV (%d)%s",
            len, off, icv, signed and " and the signature (64)" or ""))
        pinfo.cols.info = string.format("PSP seq %d, truncated", seq)
        return len
    end

    local sec_item = tree:add(f.section, tvb(off, section_len))
    sec_item:set_text(string.format("Section: %d bytes (%s)", section_len,
        encrypted and "encrypted" or "clear"))
    tree:add(f.section_len, section_len):set_generated()
    tree:add(f.encrypted, encrypted):set_generated()
    local info
    if encrypted then
        info = "encrypted section"
    else
        info = dissect_clear_section(tvb(off, section_len):tvb(), pinfo, sec_item, root)
    end
    if icv > 0 then
        tree:add(f.icv, tvb(off + section_len, icv))
    end
    if signed then
        tree:add(f.signature, tvb(off + section_len + icv, SIGNATURE_LEN))
    end
    pinfo.cols.protocol = "PSP"
    pinfo.cols.info = string.format("PSP seq %d, %d-byte section, %s", seq, section_len, info)
    return len
end

-- EtherType 0x1982: Wireshark's Ethernet dissector has shown the MAC header already.
function psp.dissector(tvb, pinfo, root)
    local tree = root:add(psp, tvb())
    return dissect_psp(tvb, pinfo, root, tree)
end

-- The UDP uplink: the datagram is the whole PSP frame, Ethernet header included.
local psp_udp = Proto("psp_udp", "PSP over UDP (psp-gateway UDP uplink)")

function psp_udp.dissector(tvb, pinfo, root)
    local tree = root:add(psp, tvb())
    local len = tvb:len()
    if len <= ETH_HEADER_LEN then
        tree:add_proto_expert_info(ex.truncated, "No PSP header after the Ethernet header")
        pinfo.cols.protocol = "PSP"
        pinfo.cols.info = "PSP, truncated"
        return len
    end
    tree:add(f.dst, tvb(0, 6))
    tree:add(f.src, tvb(6, 6))
    local et = tree:add(f.ethertype, tvb(12, 2))
    if tvb(12, 2):uint() ~= PSP_ETHERTYPE then
        et:add_proto_expert_info(ex.not_psp)
        pinfo.cols.protocol = "PSP"
        pinfo.cols.info = "PSP over UDP, not a PSP frame"
        return len
    end
    return ETH_HEADER_LEN + dissect_psp(tvb(ETH_HEADER_LEN):tvb(), pinfo, root, tree)
end

DissectorTable.get("ethertype"):add(PSP_ETHERTYPE, psp)

local registered_port = 0
local function register_udp()
    local udp = DissectorTable.get("udp.port")
    if registered_port ~= 0 then
        udp:remove(registered_port, psp_udp)
    end
    registered_port = psp.prefs.udp_port
    if registered_port ~= 0 then
        udp:add(registered_port, psp_udp)
    end
end

function psp.prefs_changed()
    if registered_port ~= psp.prefs.udp_port then
        register_udp()
    end
end

register_udp()
