#include <boost/test/unit_test.hpp>

#include <prometheus/text_serializer.h>

#include "config/routes_config.hpp"
#include "consumers/consumer.hpp"
#include "metrics/gateway_collector.hpp"
#include "metrics/process_collector.hpp"
#include "routing/routing_table.hpp"
#include "tests/support/exposition.hpp"

using namespace gatewayd;
using gatewayd::test::sample_value;

namespace {

// The collector's inputs, with consumers built against a local io_context (never started).
struct collector_fixture {
  asio::io_context ioc;
  suppliers::supplier_stats supplier_stats;
  suppliers::route_snapshot_holder routes;
  runtime::latency_histogram promotion;
  metrics::reload_stats reloads;
  gatewayd::runtime::byte_budget budget{0};
  consumers::queue_memory queue_memory{budget};
  metrics::gateway_collector collector{
      {supplier_stats, routes, promotion, reloads, budget, queue_memory,
       [] {
         return metrics::gateway_collector::thread_roles{1, 2, 3, 7, 5};
       },
       "9.9.9-test"}};

  // `retired`: consumers an earlier reload removed, exported beside the table's.
  void publish(const std::vector<std::string>& names,
               std::vector<std::shared_ptr<consumers::consumer>> retired = {}) {
    config::routes_config cfg;
    for (const auto& n : names) {
      consumers::consumer_spec spec;
      spec.name = n;
      spec.address = net::endpoint{"127.0.0.1", 9};
      spec.queue_capacity = 100;
      cfg.consumers.push_back(spec);
      cfg.routes.push_back({n + ".>", {n}});
    }
    auto snap = std::make_shared<suppliers::route_snapshot>();
    snap->table = routing::routing_table::build(cfg.rules());
    for (const auto& spec : cfg.consumers)
      snap->consumers.push_back(std::make_shared<consumers::consumer>(
          runtime::make_executor(ioc), spec, consumers::consumer::options{}));
    snap->retired = std::move(retired);
    routes.publish(std::move(snap));
  }

  std::string exposition() const {
    return prometheus::TextSerializer().Serialize(collector.Collect());
  }
};

bool has_consumer(const std::string& text, const std::string& name) {
  return text.find("consumer=\"" + name + "\"") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(label_children_follow_the_routing_table) {
  collector_fixture f;
  f.publish({"billing", "audit"});
  const auto before = f.exposition();
  BOOST_TEST(has_consumer(before, "billing"));
  BOOST_TEST(has_consumer(before, "audit"));
  BOOST_TEST(!has_consumer(before, "fraud"));
  BOOST_TEST(*sample_value(before, R"(gatewayd_consumer_queue_capacity{consumer="audit"})") == 100);
  BOOST_TEST(*sample_value(before, "gatewayd_routing_table_routes") == 2);

  f.publish({"billing", "fraud"});
  const auto after = f.exposition();
  BOOST_TEST(has_consumer(after, "billing"));
  BOOST_TEST(!has_consumer(after, "audit"));  // removed: every family forgets it
  BOOST_TEST(has_consumer(after, "fraud"));   // added: every family shows it
  for (const char* family :
       {"gatewayd_consumer_queue_depth", "gatewayd_consumer_queue_bytes",
        "gatewayd_consumer_queue_capacity", "gatewayd_consumer_connected",
        "gatewayd_consumer_messages_sent_total", "gatewayd_consumer_bytes_sent_total",
        "gatewayd_consumer_reconnects_total", "gatewayd_consumer_unacknowledged_bytes_total"}) {
    const std::string series = std::string(family) + R"({consumer="fraud"})";
    BOOST_TEST(sample_value(after, series).has_value(), series);
  }
  // One series per drop reason, present from the start (rate() needs the zero).
  BOOST_TEST(gatewayd::test::sum_samples(after, "gatewayd_consumer_dropped_messages_total",
                                         R"(consumer="fraud")") == 0);
  BOOST_TEST(
      sample_value(
          after,
          R"(gatewayd_consumer_dropped_messages_total{consumer="fraud",reason="queue_full"})")
          .has_value());
  BOOST_TEST(
      sample_value(after,
                   R"(gatewayd_consumer_disconnects_total{consumer="fraud",reason="timed_out"})")
          .has_value());
  BOOST_TEST(
      sample_value(after,
                   R"(gatewayd_consumer_connect_failures_total{consumer="fraud",reason="refused"})")
          .has_value());
}

BOOST_AUTO_TEST_CASE(a_retired_consumer_is_exported_beside_the_table) {
  collector_fixture f;
  consumers::consumer_spec spec;
  spec.name = "audit";
  spec.address = net::endpoint{"127.0.0.1", 9};
  auto audit = std::make_shared<consumers::consumer>(runtime::make_executor(f.ioc), spec,
                                                     consumers::consumer::options{});
  f.publish({"billing"}, {audit});
  const auto text = f.exposition();
  BOOST_TEST(has_consumer(text, "billing"));
  BOOST_TEST(
      sample_value(text,
                   R"(gatewayd_consumer_dropped_messages_total{consumer="audit",reason="removed"})")
          .has_value());
  BOOST_TEST(*sample_value(text, R"(gatewayd_consumer_connected{consumer="audit"})") == 0);
  // Still routes only to the table's consumers.
  BOOST_TEST(*sample_value(text, "gatewayd_routing_table_routes") == 1);
}

// An ack = true consumer's max_unacked_bytes is exported beside its unacked bytes (the
// dashboard's "unacked against the limit", the at-limit alert); a plain consumer has neither.
BOOST_AUTO_TEST_CASE(an_ack_consumer_exports_its_max_unacked_bytes) {
  collector_fixture f;
  config::routes_config cfg;
  for (const char* name : {"acked", "plain"}) {
    consumers::consumer_spec spec;
    spec.name = name;
    spec.address = net::endpoint{"127.0.0.1", 9};
    spec.ack = spec.name == "acked";
    if (spec.ack) spec.max_unacked_bytes = 65536;
    cfg.consumers.push_back(spec);
    cfg.routes.push_back({spec.name + ".>", {spec.name}});
  }
  auto snap = std::make_shared<suppliers::route_snapshot>();
  snap->table = routing::routing_table::build(cfg.rules());
  for (const auto& spec : cfg.consumers) {
    snap->consumers.push_back(std::make_shared<consumers::consumer>(
        runtime::make_executor(f.ioc), spec, consumers::consumer::options{}));
    snap->specs.push_back(spec);
  }
  f.routes.publish(std::move(snap));
  const auto text = f.exposition();
  BOOST_TEST(
      sample_value(text, R"(gatewayd_consumer_max_unacked_bytes{consumer="acked"})").value_or(-1) ==
      65536);
  BOOST_TEST(
      sample_value(text, R"(gatewayd_consumer_unacked_bytes{consumer="acked"})").value_or(-1) == 0);
  BOOST_TEST(!sample_value(text, R"(gatewayd_consumer_max_unacked_bytes{consumer="plain"})"));
  BOOST_TEST(!sample_value(text, R"(gatewayd_consumer_unacked_bytes{consumer="plain"})"));
}

BOOST_AUTO_TEST_CASE(no_routing_table_exports_no_consumer_children) {
  collector_fixture f;
  const auto text = f.exposition();
  BOOST_TEST(text.find("consumer=") == std::string::npos);
  BOOST_TEST(*sample_value(text, "gatewayd_routing_table_routes") == 0);
}

BOOST_AUTO_TEST_CASE(histogram_buckets_are_cumulative_and_resolve_microseconds) {
  using namespace std::chrono_literals;
  collector_fixture f;
  f.promotion.observe(500ns);  // le 1e-06
  f.promotion.observe(3us);    // le 5e-06
  f.promotion.observe(3us);
  f.promotion.observe(40ms);  // le 0.05
  f.promotion.observe(2s);    // only +Inf
  const auto text = f.exposition();
  const std::string b = "gatewayd_lf_promotion_latency_seconds_bucket";
  BOOST_TEST(*sample_value(text, b + R"({le="1e-06"})") == 1);
  BOOST_TEST(*sample_value(text, b + R"({le="2e-06"})") == 1);
  BOOST_TEST(*sample_value(text, b + R"({le="5e-06"})") == 3);
  BOOST_TEST(*sample_value(text, b + R"({le="0.02"})") == 3);
  BOOST_TEST(*sample_value(text, b + R"({le="0.05"})") == 4);
  BOOST_TEST(*sample_value(text, b + R"({le="0.1"})") == 4);
  BOOST_TEST(*sample_value(text, b + R"({le="+Inf"})") == 5);
  BOOST_TEST(*sample_value(text, "gatewayd_lf_promotion_latency_seconds_count") == 5);
  BOOST_TEST(*sample_value(text, "gatewayd_lf_promotion_latency_seconds_sum") == 2.0400065,
             boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(runtime_families_read_their_sources) {
  collector_fixture f;
  f.supplier_stats.frames_received = 42;
  f.supplier_stats.protocol_errors[static_cast<std::size_t>(protocol::frame_error::bad_flags)] = 3;
  f.reloads.succeeded = 4;
  f.reloads.failed = 1;
  f.reloads.last_successful = false;
  f.reloads.last_success_unix_seconds = 1700000000.5;
  const auto text = f.exposition();
  BOOST_TEST(*sample_value(text, "gatewayd_supplier_messages_received_total") == 42);
  BOOST_TEST(
      *sample_value(text, R"(gatewayd_supplier_protocol_errors_total{reason="bad_flags"})") == 3);
  // frame_error::none is not an error and has no child.
  BOOST_TEST(text.find(R"(reason="none")") == std::string::npos);
  BOOST_TEST(*sample_value(text, R"(gatewayd_config_reloads_total{result="success"})") == 4);
  BOOST_TEST(*sample_value(text, R"(gatewayd_config_reloads_total{result="failure"})") == 1);
  BOOST_TEST(*sample_value(text, "gatewayd_config_last_reload_successful") == 0);
  BOOST_TEST(*sample_value(text, "gatewayd_config_last_reload_success_timestamp_seconds") ==
             1700000000.5);
  BOOST_TEST(*sample_value(text, R"(gatewayd_lf_threads{role="leader"})") == 1);
  BOOST_TEST(*sample_value(text, R"(gatewayd_lf_threads{role="processing"})") == 2);
  BOOST_TEST(*sample_value(text, R"(gatewayd_lf_threads{role="follower"})") == 3);
  BOOST_TEST(*sample_value(text, "gatewayd_lf_promotions_without_follower_total") == 7);
  BOOST_TEST(*sample_value(text, "gatewayd_lf_leadership_taken_back_total") == 5);
  BOOST_TEST(*sample_value(text, R"(gatewayd_build_info{version="9.9.9-test"})") == 1);
}

BOOST_AUTO_TEST_CASE(process_collector_reads_this_process) {
  const auto text = prometheus::TextSerializer().Serialize(metrics::process_collector().Collect());
  BOOST_TEST(*sample_value(text, "process_open_fds") >= 3);
  BOOST_TEST(*sample_value(text, "process_resident_memory_bytes") > 1e5);
  BOOST_TEST(*sample_value(text, "process_max_fds") >= *sample_value(text, "process_open_fds"));
  const double start = *sample_value(text, "process_start_time_seconds");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  BOOST_TEST(start <= now + 1);
  BOOST_TEST(start > now - 3600);  // this test process started moments ago
}
