// JsonLine: the steps.jsonl / graph writer produces JSON that nlohmann parses back to the same values, escapes
// control characters and quotes, replaces invalid UTF-8 byte by byte and writes non-finite numbers as null.
#include "trace/json_line.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace tt {
namespace {

TEST(JsonLine, RoundTripsThroughAParser) {
  JsonLine j;
  j.begin_object()
      .field("step", int32_t{3})
      .field("phase", "GENERATE")
      .field("p", 0.25)
      .field("big", uint64_t{1} << 63);
  j.begin_array("ids");
  for (int32_t v : {1, -2, 3}) j.value(v);
  j.end_array();
  j.begin_array("top");
  j.begin_object().field("id", int32_t{7}).field("text", std::string_view("a\"b\\c\n\t\x01")).end_object();
  j.begin_object().field("id", int32_t{8}).end_object();
  j.end_array();
  j.key("none").null().field("nan", std::nan("")).field("inf", INFINITY).field("ok", true).end_object();
  const nlohmann::json parsed = nlohmann::json::parse(j.str());
  EXPECT_EQ(parsed["step"], 3);
  EXPECT_EQ(parsed["phase"], "GENERATE");
  EXPECT_DOUBLE_EQ(parsed["p"].get<double>(), 0.25);
  EXPECT_EQ(parsed["big"].get<uint64_t>(), uint64_t{1} << 63);
  EXPECT_EQ(parsed["ids"], nlohmann::json::array({1, -2, 3}));
  EXPECT_EQ(parsed["top"][0]["text"], "a\"b\\c\n\t\x01");
  EXPECT_EQ(parsed["top"][1]["id"], 8);
  EXPECT_TRUE(parsed["none"].is_null());
  EXPECT_TRUE(parsed["nan"].is_null());
  EXPECT_TRUE(parsed["inf"].is_null());
  EXPECT_EQ(parsed["ok"], true);
  j.clear();
  j.begin_object().field("again", int32_t{1}).end_object();
  EXPECT_EQ(j.str(), "{\"again\":1}");
}

// Keys take a one-append path when plain and short; any other key is escaped as a string value is.
TEST(JsonLine, KeysPlainEscapedAndLong) {
  const std::string long_key(80, 'k');
  JsonLine j;
  j.begin_object().field("plain", 1).field("q\"uote", 2).field(long_key, 3).field("", 4).field("caf\xc3\xa9", 5);
  j.end_object();
  EXPECT_EQ(j.str().substr(0, 23), "{\"plain\":1,\"q\\\"uote\":2,") << j.str();
  const nlohmann::json parsed = nlohmann::json::parse(j.str());
  EXPECT_EQ(parsed["plain"], 1);
  EXPECT_EQ(parsed["q\"uote"], 2);
  EXPECT_EQ(parsed[long_key], 3);
  EXPECT_EQ(parsed[""], 4);
  EXPECT_EQ(parsed["caf\xc3\xa9"], 5);
}

TEST(JsonLine, FloatsPrintTheirShortestTextAndReadBackExactly) {
  JsonLine j;
  j.begin_object().begin_array("v");
  for (float v : {0.1f, 1.0f / 3.0f, -2.5e-30f, 3.4028235e38f, 1e-45f}) j.value(v);
  j.end_array().end_object();
  EXPECT_EQ(j.str().substr(0, 10), "{\"v\":[0.1,") << j.str();  // not 0.10000000149011612
  const nlohmann::json parsed = nlohmann::json::parse(j.str())["v"];
  ASSERT_EQ(parsed.size(), 5u);
  EXPECT_EQ(parsed[1].get<float>(), 1.0f / 3.0f);
  EXPECT_EQ(parsed[2].get<float>(), -2.5e-30f);
  EXPECT_EQ(parsed[3].get<float>(), 3.4028235e38f);
  EXPECT_EQ(parsed[4].get<float>(), 1e-45f);
}

TEST(JsonLine, PlainPrefixThenEscapes) {
  JsonLine j;
  j.value(std::string_view("plain ascii then \"quote\"\n and \xc3\xa9"));
  EXPECT_EQ(j.str(), "\"plain ascii then \\\"quote\\\"\\n and \xc3\xa9\"");
}

TEST(JsonLine, InvalidUtf8BecomesReplacementCharacters) {
  std::string out;
  append_json_string(out, std::string_view("ok \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀 kept
  EXPECT_EQ(nlohmann::json::parse(out), "ok \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  out.clear();
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate, a byte 0xFF.
  append_json_string(out, std::string_view("\x80|\xE2\x82|\xC0\xAF|\xED\xA0\x80|\xFF"));
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(nlohmann::json::parse(out), r + "|" + r + r + "|" + r + r + "|" + r + r + r + "|" + r);
}

}  // namespace
}  // namespace tt
