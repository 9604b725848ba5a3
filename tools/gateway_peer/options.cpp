#include "tools/gateway_peer/options.hpp"

#include <charconv>
#include <cmath>

#include "protocol/frame_codec.hpp"
#include "tools/traffic/frame_batch.hpp"
#include "tools/traffic/payload_header.hpp"

namespace gatewayd::tools {

const char* const main_help =
    "usage: gateway-peer send --to HOST:PORT[,HOST:PORT...] --address A [options]\n"
    "       gateway-peer recv --listen HOST:PORT [options]\n"
    "       gateway-peer top --metrics HOST:PORT [options]\n"
    "       gateway-peer (send|recv|top) --help\n"
    "\n"
    "Sends GWP/1 frames to a gatewayd supplier listener, or plays a consumer endpoint that\n"
    "the gateway dials, verifying and timing every frame it receives; or watches a running\n"
    "gateway live in the terminal (top).\n"
    "\n"
    "exit codes: 0 ok, 1 runtime error (cannot connect or listen, connection lost),\n"
    "            2 bad arguments, 3 verification failed (corrupt frames, --expect not reached,\n"
    "            frames a --confirm sender saw neither confirmed nor rejected)\n";

const char* const send_help =
    "usage: gateway-peer send --to HOST:PORT[,HOST:PORT...] --address A[,B...] [--spread N]\n"
    "                         [--size N] [--rate R] [--count C | --duration D] [--connections K]\n"
    "                         [--reconnect] [--json]\n"
    "                         [--confirm [--window N] [--confirm-wait S]\n"
    "                          [--confirm-deadline S]]\n"
    "                         [--tls-ca FILE [--tls-cert FILE --tls-key FILE]\n"
    "                          [--tls-server-name NAME]]\n"
    "\n"
    "  --to HOST:PORT[,...] the gateways' supplier listeners, or a balancer in front of them\n"
    "                     (literal IPv4, or [IPv6]:port). Connection i starts at address i mod n;\n"
    "                     when its connection ends it moves on to the next address (several\n"
    "                     addresses imply --reconnect). A gateway that stops asks its suppliers\n"
    "                     to leave (end-of-file): the sender then closes its side, so the gateway\n"
    "                     reads all it sent, and moves on. A write that fails, or the last\n"
    "                     write before an end-of-file that came with a reset (a gateway that\n"
    "                     died, not one that stops), is written again on the next connection\n"
    "                     and reported as re-sent. Each connection numbers its frames afresh\n"
    "                     (a new sender id): order holds per connection\n"
    "  --address A[,B...] the frames' address, e.g. orders.eu.created; with several (at most\n"
    "                     256), frame i of a connection goes to the i-th in turn (mixed\n"
    "                     addresses) and is numbered in that address's stream\n"
    "  --spread N         many distinct addresses: each address gets a last token of 8 digits,\n"
    "                     frame i of a connection the number i mod N (--address t.x --spread\n"
    "                     1000000: t.x.00000000 .. t.x.00999999 in turn); at most 100000000\n"
    "  --size N           payload bytes (default 128, at least 16: the first 16 carry the send\n"
    "                     time, the sequence number, stream and sender id the receiver checks)\n"
    "  --rate R           frames per second over all connections (default: as fast as possible)\n"
    "  --count C          frames to send over all connections, then exit\n"
    "  --duration D       seconds to send, then exit (default: until SIGINT/SIGTERM)\n"
    "  --connections K    supplier connections, one sending thread each (default 1)\n"
    "  --reconnect        reconnect after a lost connection (default with one address: exit 1)\n"
    "  --json             print the summary as one JSON object on stdout\n"
    "  --confirm          ask the gateway to confirm every frame (flags 0x01; the contract is\n"
    "                     docs/protocol.md, \"Confirms and acknowledgements\"). Each connection\n"
    "                     numbers its frames 1, 2, ... and keeps those neither confirmed nor\n"
    "                     rejected, at most --window; it reads the gateway's `confirm N` and\n"
    "                     `reject n reason` on the same socket while it writes. Its next\n"
    "                     connection (--reconnect, several --to) first sends the frames still\n"
    "                     unconfirmed again, in order, byte for byte, numbered from 1 (reported\n"
    "                     as resent; a receiver that had one counts the copy as duplicated),\n"
    "                     then new ones. A rejected frame is counted by reason, never resent. A\n"
    "                     malformed control frame drops the connection (counted; redialled\n"
    "                     with --reconnect). At the end (--count, --duration, SIGINT) it waits\n"
    "                     up to --confirm-wait for the last confirms (a second SIGINT ends the\n"
    "                     wait) and reports sent, resent, confirmed, rejected by reason and\n"
    "                     unconfirmed. Over --tls-ca too (one connection, no --reconnect)\n"
    "  --window N         frames unconfirmed per connection before it waits for confirms\n"
    "                     (default 10000, at most 1000000; 32 bytes of memory each)\n"
    "  --confirm-wait S   seconds to wait at the end for the last confirms (default 5)\n"
    "  --confirm-deadline S  a connection whose unconfirmed frames see no confirm or reject\n"
    "                     for S seconds is dropped as lost, and the next address dialled (a\n"
    "                     gateway whose host vanished, or a path that lost one direction,\n"
    "                     sends no reset); its frames are resent there. Default: no deadline\n"
    "  --tls-ca FILE      speak TLS to the gateway, trusting the CA in FILE (PEM); the\n"
    "                     handshake is part of connecting; no --reconnect with TLS\n"
    "  --tls-cert FILE    client certificate for mutual TLS (with --tls-key)\n"
    "  --tls-key FILE     its private key\n"
    "  --tls-server-name N  SNI, and the name the gateway's certificate must carry (default:\n"
    "                     the chain is verified, the name is not)\n"
    "\n"
    "exit codes: 0 ok, 1 cannot connect / connection lost, 2 bad arguments,\n"
    "            3 --confirm: frames left unconfirmed (neither confirmed nor rejected) at exit\n";

const char* const recv_help =
    "usage: gateway-peer recv --listen HOST:PORT [--stall-after S] [--rate N] [--print]\n"
    "                         [--duration D]\n"
    "                         [--expect N] [--json] [--ack] [--one-consumer]\n"
    "                         [--seen-log FILE]\n"
    "                         [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]\n"
    "\n"
    "Accepts the gateway's consumer connection(s) (and re-accepts after a disconnect), checks\n"
    "every frame's order per (sender, stream), and prints a live line about once a second on\n"
    "stderr: frames/s, MB/s, latency p50/p99/p99.9/max, lost, reordered, duplicated. A summary\n"
    "follows at the end. Sequence numbers start at 0: frames before a stream's first arrival\n"
    "count as lost. A frame seen again (a redelivery, a supplier's resend) counts as duplicated\n"
    "if it is at most 1024 numbers behind its stream's newest, else as late.\n"
    "\n"
    "  --listen HOST:PORT the consumer endpoint the gateway dials (port 0: any free port,\n"
    "                     printed on stderr as 'listening on HOST:PORT')\n"
    "  --stall-after S    stop reading S seconds after the first frame (a flow-controlled\n"
    "                     consumer); the connection stays open\n"
    "  --rate N           read at most about N frames a second (a slow replica), with a small\n"
    "                     receive buffer so that the gateway, not this host, holds the rest;\n"
    "                     a pause with nothing to read is made up for 0.1 s at most\n"
    "  --print            show each frame on stdout: address, size, payload preview\n"
    "  --duration D       run D seconds, then print the summary and exit\n"
    "  --expect N         exit as soon as N distinct frames arrived (a duplicate, which a\n"
    "                     redelivery may cause, is not counted twice; exit 3 if --duration\n"
    "                     ends first)\n"
    "  --json             print the summary as one JSON object on stdout\n"
    "  --ack              be an `ack = true` consumer: after each read that completed frames,\n"
    "                     send `ack N` on that connection, N = the data frames it has received\n"
    "                     whole since it was accepted (one ack per read, not per frame). With\n"
    "                     --stall-after the acks stop with the reads: a consumer that never acks.\n"
    "  --one-consumer     the gateway connections are all one consumer (its redials, or several\n"
    "                     gateway nodes dialling it): frames are checked per (sender, stream)\n"
    "                     whichever connection brings them, so a supplier's resend through\n"
    "                     another node counts as duplicated, not as a gap. Default: each\n"
    "                     connection slot is a copy of its own (one receiver, several consumers)\n"
    "  --seen-log FILE    append each frame's identity to FILE, 12 bytes little-endian: sender\n"
    "                     (u16), stream (u8), 0 (u8), sequence (u64); with --ack when the ack\n"
    "                     covering it is written, else after the read that brought it. Written\n"
    "                     as it goes, so a receiver killed mid-run leaves what it had taken\n"
    "                     (bench/: which frames any member of a group got, across receivers)\n"
    "  --tls-cert FILE    serve TLS to the gateway with this certificate (with --tls-key);\n"
    "                     a connection whose handshake fails is closed and reported\n"
    "  --tls-key FILE     its private key\n"
    "  --tls-client-ca FILE  require a client certificate (the gateway's) this CA signed\n"
    "\n"
    "exit codes: 0 ok, 1 cannot listen, 2 bad arguments,\n"
    "            3 corrupt frames seen or --expect not reached\n";

const char* const top_help =
    "usage: gateway-peer top --metrics HOST:PORT [--interval S] [--once]\n"
    "\n"
    "A live view of one gateway, read once a second from its metrics listener (/metrics,\n"
    "/connz, /routez) and drawn in the terminal with plain ANSI sequences:\n"
    "  the build, the routing table in use (version, routes, sha256) and the uptime;\n"
    "  frames in, unroutable and sent per second; CONFIRM frames confirmed (and per second),\n"
    "  unconfirmed, rejected by reason; supplier sessions by state (reading, paused,\n"
    "  confirming: CONFIRM frames owed), reclaimed, backpressure pauses per second;\n"
    "  each consumer: state (connected, congested, disconnected), overflow policy, queue\n"
    "  depth/capacity and fill, frames sent and per second, bytes per second, drops and per\n"
    "  second, unacked frames and bytes and redelivered frames (ack = true consumers),\n"
    "  reconnects; each supplier connection (oldest first): state, age, frames and per second,\n"
    "  CONFIRM frames owed and confirmed, TLS record layer.\n"
    "Rates are the growth between two looks. When a look fails the last figures stay, under\n"
    "the reason.\n"
    "\n"
    "keys: q quit (Ctrl-C too)  s next sort column  r reverse the order\n"
    "      n name  f fill  t rate (sent per second)  d drops  u unacked bytes\n"
    "\n"
    "  --metrics HOST:PORT the gateway's [metrics] listen (literal IPv4, or [IPv6]:port)\n"
    "  --interval S       seconds between two looks (default 1)\n"
    "  --once             no screen: look twice, --interval apart, print the view and exit\n"
    "                     (for scripts; the output need not be a terminal)\n"
    "\n"
    "exit codes: 0 ok, 1 --once could not read the gateway, 2 bad arguments (or the output\n"
    "            is not a terminal without --once)\n";

namespace {

class arg_reader {
 public:
  explicit arg_reader(const std::vector<std::string>& args) : args_(args) {}
  bool done() const { return i_ >= args_.size(); }
  const std::string& next_flag() { return args_[i_++]; }
  const std::string& value(const std::string& flag) {
    if (i_ >= args_.size()) throw usage_error(flag + " needs a value");
    return args_[i_++];
  }

 private:
  const std::vector<std::string>& args_;
  std::size_t i_ = 0;
};

std::uint64_t to_count(const std::string& flag, const std::string& v, std::uint64_t min,
                       std::uint64_t max) {
  std::uint64_t n = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || n < min || n > max) {
    std::string msg = flag;
    msg += ": '";
    msg += v;
    msg += "' is not a whole number in ";
    msg += std::to_string(min);
    msg += "..";
    msg += std::to_string(max);
    throw usage_error(msg);
  }
  return n;
}

double to_seconds(const std::string& flag, const std::string& v, bool allow_zero) {
  std::size_t used = 0;
  double d = -1;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !std::isfinite(d) || d < 0 || (!allow_zero && d == 0)) {
    std::string msg = flag;
    msg += ": '";
    msg += v;
    msg += allow_zero ? "' is not a number >= 0" : "' is not a number > 0";
    throw usage_error(msg);
  }
  return d;
}

net::endpoint to_endpoint(const std::string& flag, const std::string& v) {
  auto ep = net::parse_endpoint(v);
  if (!ep) {
    std::string msg = flag;
    msg += ": '";
    msg += v;
    msg += "' is not IPv4:PORT or [IPv6]:PORT (a literal address, no host names)";
    throw usage_error(msg);
  }
  return *ep;
}

// "A,B": each a dialable endpoint.
std::vector<net::endpoint> to_endpoints(const std::string& flag, const std::string& v) {
  std::vector<net::endpoint> out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = v.find(',', from);
    out.push_back(
        to_endpoint(flag, v.substr(from, comma == std::string::npos ? comma : comma - from)));
    if (out.back().port == 0) throw usage_error(flag + ": port 0 cannot be dialled");
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

// "a,b,c": each a GWP/1 address; at most one stream id's worth of them.
std::vector<std::string> to_addresses(const std::string& flag, const std::string& v) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = v.find(',', from);
    std::string a = v.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (!protocol::valid_address(a) || a.size() > protocol::max_address_length) {
      throw usage_error(flag + ": '" + a +
                        "' is not a GWP/1 address (tokens of A-Z a-z 0-9 _ - joined by '.', "
                        "at most 255 bytes)");
    }
    out.push_back(std::move(a));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (out.size() > traffic::max_streams) throw usage_error(flag + ": at most 256 addresses");
  return out;
}

}  // namespace

send_options parse_send(const std::vector<std::string>& args) {
  send_options o;
  bool have_to = false, have_address = false, have_window = false, have_wait = false,
       have_deadline = false;
  arg_reader r(args);
  while (!r.done()) {
    const std::string flag = r.next_flag();
    if (flag == "--to") {
      o.to = to_endpoints(flag, r.value(flag));
      have_to = true;
    } else if (flag == "--address") {
      o.addresses = to_addresses(flag, r.value(flag));
      have_address = true;
    } else if (flag == "--spread") {
      o.spread = static_cast<std::uint32_t>(
          to_count(flag, r.value(flag), 1, traffic::frame_batch::max_spread));
    } else if (flag == "--size") {
      o.size = to_count(flag, r.value(flag), traffic::header_size, 256u << 20);
    } else if (flag == "--rate") {
      o.rate = to_seconds(flag, r.value(flag), false);
    } else if (flag == "--count") {
      o.count = to_count(flag, r.value(flag), 1, traffic::max_sequence);
    } else if (flag == "--duration") {
      o.duration = to_seconds(flag, r.value(flag), false);
    } else if (flag == "--connections") {
      o.connections = static_cast<unsigned>(to_count(flag, r.value(flag), 1, 10000));
    } else if (flag == "--reconnect") {
      o.reconnect = true;
    } else if (flag == "--json") {
      o.json = true;
    } else if (flag == "--confirm") {
      o.confirm = true;
    } else if (flag == "--window") {
      o.window = to_count(flag, r.value(flag), 1, 1'000'000);
      have_window = true;
    } else if (flag == "--confirm-wait") {
      o.confirm_wait = to_seconds(flag, r.value(flag), true);
      have_wait = true;
    } else if (flag == "--confirm-deadline") {
      o.confirm_deadline = to_seconds(flag, r.value(flag), false);
      have_deadline = true;
    } else if (flag.rfind("--tls-", 0) != 0 || !parse_tls_flag(o.tls, flag, r.value(flag))) {
      throw usage_error("unknown option '" + flag + "'");
    }
  }
  if ((have_window || have_wait || have_deadline) && !o.confirm)
    throw usage_error(std::string(have_window ? "--window"
                                  : have_wait ? "--confirm-wait"
                                              : "--confirm-deadline") +
                      " goes with --confirm");
  if (o.tls.enabled() || !o.tls.key.empty() || !o.tls.server_name.empty()) {
    if (o.tls.ca.empty()) throw usage_error("TLS needs --tls-ca (the gateway's CA)");
    if (o.tls.cert.empty() != o.tls.key.empty())
      throw usage_error("give --tls-cert and --tls-key together");
    if (!o.tls.client_ca.empty()) throw usage_error("--tls-client-ca is for recv");
  }
  if (!have_to) throw usage_error("--to HOST:PORT is required");
  if (o.to.size() > 1) o.reconnect = true;
  if (!have_address) throw usage_error("--address A is required");
  if (o.count != 0 && o.duration != 0) throw usage_error("give --count or --duration, not both");
  if (o.count != 0 && o.count < o.connections)
    throw usage_error("--count must be at least --connections");
  if (o.tls.enabled() && o.reconnect)
    throw usage_error("--tls-ca cannot go with --reconnect or several --to addresses (yet)");
  return o;
}

recv_options parse_recv(const std::vector<std::string>& args) {
  recv_options o;
  bool have_listen = false;
  arg_reader r(args);
  while (!r.done()) {
    const std::string flag = r.next_flag();
    if (flag == "--listen") {
      o.listen = to_endpoint(flag, r.value(flag));
      have_listen = true;
    } else if (flag == "--stall-after") {
      o.stall_after = to_seconds(flag, r.value(flag), true);
    } else if (flag == "--rate") {
      o.rate = static_cast<double>(to_count(flag, r.value(flag), 1, 100'000'000));
    } else if (flag == "--print") {
      o.print = true;
    } else if (flag == "--duration") {
      o.duration = to_seconds(flag, r.value(flag), false);
    } else if (flag == "--expect") {
      o.expect = to_count(flag, r.value(flag), 1, traffic::max_sequence);
    } else if (flag == "--json") {
      o.json = true;
    } else if (flag == "--ack") {
      o.ack = true;
    } else if (flag == "--one-consumer") {
      o.one_consumer = true;
    } else if (flag == "--seen-log") {
      o.seen_log = r.value(flag);
    } else if (flag.rfind("--tls-", 0) != 0 || !parse_tls_flag(o.tls, flag, r.value(flag))) {
      throw usage_error("unknown option '" + flag + "'");
    }
  }
  if (!have_listen) throw usage_error("--listen HOST:PORT is required");
  if (!o.tls.ca.empty() || !o.tls.server_name.empty())
    throw usage_error("--tls-ca and --tls-server-name are for send");
  if (o.tls.cert.empty() != o.tls.key.empty())
    throw usage_error("give --tls-cert and --tls-key together");
  if (!o.tls.client_ca.empty() && o.tls.cert.empty())
    throw usage_error("--tls-client-ca needs --tls-cert and --tls-key");
  return o;
}

top_options parse_top(const std::vector<std::string>& args) {
  top_options o;
  bool have_metrics = false;
  arg_reader r(args);
  while (!r.done()) {
    const std::string flag = r.next_flag();
    if (flag == "--metrics") {
      o.metrics = to_endpoint(flag, r.value(flag));
      if (o.metrics.port == 0) throw usage_error(flag + ": port 0 cannot be dialled");
      have_metrics = true;
    } else if (flag == "--interval") {
      o.interval = to_seconds(flag, r.value(flag), false);
    } else if (flag == "--once") {
      o.once = true;
    } else {
      throw usage_error("unknown option '" + flag + "'");
    }
  }
  if (!have_metrics) throw usage_error("--metrics HOST:PORT is required");
  return o;
}

}  // namespace gatewayd::tools
