// Layer application: overlay semantics (whiteouts, opaque dirs, hardlinks across layers, type
// changes, modes, long names) and refusal of hostile entries without touching anything outside.
#include <gmock/gmock.h>

#include "image_fixture.hpp"
#include "sandboxrun/error.hpp"

namespace {

using namespace image_test;
using sandboxrun::Error;
using sandboxrun::image::UnpackOptions;
using testing::HasSubstr;

Entry owned(Entry e, int64_t uid, int64_t gid) {
  e.uid = uid;
  e.gid = gid;
  return e;
}

TEST(ImageLayer, MultiLayerOverlaySemantics) {
  TempDir tmp;
  const std::string pax_name = "long/" + std::string(150, 'p') + "/f";
  const std::string gnu_dir = "gnu/" + std::string(120, 'g');
  const std::string gnu_name = gnu_dir + "/" + std::string(120, 'n');
  const std::vector<Entry> layer1 = {
      D("etc"), F("etc/passwd", "root"), F("etc/hosts", "h"),
      D("opt"), D("opt/a"), F("opt/a/one", "1"), D("opt/a/sub"), F("opt/a/sub/old", "o"),
      F("opt/keep", "k"),
      D("data"), F("data/x", "x"),
      F("bin/su", "su", 04755), H("bin/su-link", "bin/su"),
      D("usr"), D("usr/lib"), F("usr/lib/libc", "c"), L("lib", "usr/lib"),
      D("sticky", 01777), D("gid", 02755), D("locked", 0555),
      F("replaced-by-dir", "f"),
      D("dir-replaced-by-file"), F("dir-replaced-by-file/child", "c"),
      D("gone"), F("gone/inside", "g"),
      owned(F("owned", "o"), 1234, 5678),
  };
  const std::vector<Entry> layer2 = {
      F("etc/.wh.hosts", ""),
      D("opt/a"), F("opt/a/two", "2"), F("opt/a/sub/new", "n"), F("opt/a/.wh..wh..opq", ""),
      H("data/x-link", "data/x"),  // hardlink to a file of the layer below
      F("dir-replaced-by-file", "now a file"),
      D("replaced-by-dir"), F("replaced-by-dir/inner", "i"),
      F(".wh.gone", ""),
      F("lib/newlib", "n"),  // through an in-image relative symlink, as Docker does
      D("lib/newdir", 0750),
      F("locked/added", "a"),  // a read-only directory of a lower layer still takes files
      F(pax_name, "pax"),
  };
  const std::vector<Entry> layer3 = {
      D("dir-replaced-by-file"), F("dir-replaced-by-file/again", "a"),
      F("opt/keep", "k3"), F("opt/.wh.keep", ""),  // a whiteout hides lower layers only
      F(gnu_name, "gnu"),
  };
  apply_layers(tmp / "root", {{make_tar(layer1), Compression::gzip},
                              {make_tar(layer2), Compression::zstd},
                              {make_tar(layer3, /*gnu=*/true), Compression::none}});

  const std::string owner = geteuid() == 0 ? " owner=1234:5678" : "";
  std::map<std::string, std::string> expected = {
      {"bin", "dir 0755"},
      {"bin/su", "file 4755 'su' links=2"},
      {"bin/su-link", "file 4755 'su' links=2"},
      {"data", "dir 0755"},
      {"data/x", "file 0644 'x' links=2"},
      {"data/x-link", "file 0644 'x' links=2"},
      {"dir-replaced-by-file", "dir 0755"},
      {"dir-replaced-by-file/again", "file 0644 'a'"},
      {"etc", "dir 0755"},
      {"etc/passwd", "file 0644 'root'"},
      {"gid", "dir 2755"},
      {"gnu", "dir 0755"},
      {gnu_dir, "dir 0755"},
      {gnu_name, "file 0644 'gnu'"},
      {"lib", "symlink -> usr/lib"},
      {"locked", "dir 0555"},
      {"locked/added", "file 0644 'a'"},
      {"long", "dir 0755"},
      {"long/" + std::string(150, 'p'), "dir 0755"},
      {pax_name, "file 0644 'pax'"},
      {"opt", "dir 0755"},
      {"opt/a", "dir 0755"},
      {"opt/a/sub", "dir 0755"},
      {"opt/a/sub/new", "file 0644 'n'"},
      {"opt/a/two", "file 0644 '2'"},
      {"opt/keep", "file 0644 'k3'"},
      {"owned", "file 0644 'o'" + owner},
      {"replaced-by-dir", "dir 0755"},
      {"replaced-by-dir/inner", "file 0644 'i'"},
      {"sticky", "dir 1777"},
      {"usr", "dir 0755"},
      {"usr/lib", "dir 0755"},
      {"usr/lib/libc", "file 0644 'c'"},
      {"usr/lib/newdir", "dir 0750"},
      {"usr/lib/newlib", "file 0644 'n'"},
  };
  EXPECT_EQ(snapshot(tmp / "root"), expected);

  struct stat st {};
  ASSERT_EQ(stat((tmp / "root" / "etc" / "passwd").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, 1'700'000'000);
  ASSERT_EQ(stat((tmp / "root" / "sticky").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, 1'700'000'000);  // directory times are set after their children
}

TEST(ImageLayer, RootEntrySetsTheRootMode) {
  TempDir tmp;
  apply_layers(tmp / "root", {{make_tar({D("./", 0711), F("./a", "a")}), Compression::gzip}});
  struct stat st {};
  ASSERT_EQ(stat((tmp / "root").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  EXPECT_EQ(snapshot(tmp / "root"), (std::map<std::string, std::string>{{"a", "file 0644 'a'"}}));
}

TEST(ImageLayer, NonAsciiNamesKeepTheirBytes) {
  TempDir tmp;
  const std::string dir = "caf\xc3\xa9";
  const std::string name = dir + "/\xff-not-utf8";
  apply_layers(tmp / "root", {{make_tar({D(dir), F(name, "x")}), Compression::gzip},
                              {make_tar({F(dir + "/g\xc3\xbcnu", "y")}, /*gnu=*/true), Compression::none}});
  EXPECT_EQ(snapshot(tmp / "root"), (std::map<std::string, std::string>{{dir, "dir 0755"},
                                                                        {name, "file 0644 'x'"},
                                                                        {dir + "/g\xc3\xbcnu", "file 0644 'y'"}}));
}

TEST(ImageLayer, DeviceNodesAndFifosAreSkipped) {
  TempDir tmp;
  fs::create_directories(tmp / "root");
  sandboxrun::UniqueFd root(open((tmp / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  sandboxrun::image::RootfsWriter w(root.get(), {});
  Entry null{"dev/null", Entry::chardev, {}, 0666};
  Entry fifo{"run/fifo", Entry::fifo, {}, 0644};
  const std::string tar = make_tar({D("dev"), null, D("run"), fifo, F("ok", "1")});
  bool done = false;
  w.apply_layer(
      [&]() -> std::span<const std::byte> {
        if (done) return {};
        done = true;
        return {reinterpret_cast<const std::byte*>(tar.data()), tar.size()};
      },
      Compression::none, "devices");
  w.finish();
  EXPECT_EQ(w.stats().skipped_devices, 2u);
  EXPECT_EQ(w.stats().files, 1u);
  EXPECT_EQ(snapshot(tmp / "root"),
            (std::map<std::string, std::string>{{"dev", "dir 0755"}, {"run", "dir 0755"}, {"ok", "file 0644 '1'"}}));
}

// A destination beside a canary directory: after every hostile layer, the canary and the
// directory holding both must be exactly as before.
class Hostile : public testing::Test {
 protected:
  void SetUp() override {
    dest_ = tmp_ / "dest";
    canary_ = tmp_ / "canary";
    fs::create_directories(canary_);
    put(canary_ / "secret", "s");
    before_ = snapshot(tmp_.path());
  }

  // Applies the layers and expects an Error mentioning `message` and the offending entry.
  void expect_refused(const std::vector<std::vector<Entry>>& layers, const std::string& message,
                      const std::string& entry, const UnpackOptions& options = {}) {
    std::vector<LayerSpec> specs;
    for (const auto& l : layers) specs.push_back({make_tar(l), Compression::gzip});
    try {
      apply_layers(dest_, specs, options);
      ADD_FAILURE() << "not refused; expected: " << message;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
      EXPECT_THAT(e.what(), HasSubstr("entry '" + entry + "'"));
      EXPECT_THAT(e.what(), HasSubstr("layer layer"));  // the label names the layer
    }
    expect_outside_untouched();
  }

  void expect_outside_untouched() {
    auto after = snapshot(tmp_.path());
    std::erase_if(after, [](const auto& kv) { return kv.first.starts_with("dest"); });
    EXPECT_EQ(after, before_);
  }

  TempDir tmp_;
  fs::path dest_, canary_;
  std::map<std::string, std::string> before_;
};

TEST_F(Hostile, AbsoluteName) { expect_refused({{F("/abs-escape", "x")}}, "absolute path", "/abs-escape"); }

TEST_F(Hostile, DotDotName) {
  expect_refused({{F("../canary/secret", "x")}}, "contains '..'", "../canary/secret");
  expect_refused({{F("a/../../canary/pwned", "x")}}, "contains '..'", "a/../../canary/pwned");
}

TEST_F(Hostile, AbsoluteSymlinkAncestorThenFile) {
  expect_refused({{L("link", canary_.string()), F("link/pwned", "x")}}, "leads outside the image",
                 "link/pwned");
}

TEST_F(Hostile, RelativeSymlinkEscapeThenFile) {
  expect_refused({{L("link", "../canary"), F("link/pwned", "x")}}, "leads outside the image", "link/pwned");
}

TEST_F(Hostile, SymlinkToRootThenDirectory) {
  expect_refused({{L("link", "/"), D("link/newdir")}}, "leads outside the image", "link/newdir/");
}

TEST_F(Hostile, SymlinkChain) {
  expect_refused({{L("a", "b"), L("b", "c"), L("c", "../../canary"), F("a/pwned", "x")}},
                 "leads outside the image", "a/pwned");
}

TEST_F(Hostile, SymlinkLoop) {
  expect_refused({{L("loop", "loop"), F("loop/x", "x")}}, "too many levels of symlinks", "loop/x");
}

TEST_F(Hostile, SymlinkFromALowerLayer) {
  const std::string name = "link/" + canary_.relative_path().string() + "/pwned";
  expect_refused({{L("link", "/")}, {F(name, "x")}}, "leads outside the image", name);
}

TEST_F(Hostile, WhiteoutThroughSymlink) {
  expect_refused({{L("link", "../canary"), F("link/.wh.secret", "")}}, "leads outside the image",
                 "link/.wh.secret");
}

TEST_F(Hostile, OpaqueThroughSymlink) {
  expect_refused({{L("link", canary_.string()), F("link/.wh..wh..opq", "")}}, "leads outside the image",
                 "link/.wh..wh..opq");
}

TEST_F(Hostile, HardlinkOutside) {
  expect_refused({{H("h", "../canary/secret")}}, "contains '..'", "h");
  expect_refused({{H("h", canary_.string() + "/secret")}}, "absolute path", "h");
}

TEST_F(Hostile, HardlinkThroughSymlink) {
  expect_refused({{L("link", "../canary"), H("h", "link/secret")}}, "leads outside the image", "h");
  expect_refused({{L("link", canary_.string()), H("h", "link/secret")}}, "leads outside the image", "h");
}

TEST_F(Hostile, HardlinkToMissingOrDirectory) {
  expect_refused({{H("h", "nope")}}, "does not exist", "h");
  expect_refused({{D("d"), H("h", "d")}}, "hardlink to directory", "h");
}

TEST_F(Hostile, OddWhiteoutNames) {
  expect_refused({{F(".wh..", "")}}, "not a valid whiteout", ".wh..");
  expect_refused({{F(".wh...", "")}}, "not a valid whiteout", ".wh...");
  expect_refused({{F(".wh.", "")}}, "not a valid whiteout", ".wh.");
  expect_refused({{D("d"), F("d/.wh..wh.plnk", "")}}, "not a valid whiteout", "d/.wh..wh.plnk");
}

TEST_F(Hostile, RootReplacedBySymlink) {
  expect_refused({{L(".", canary_.string()), F("pwned", "x")}}, "root must be a directory", ".");
}

TEST_F(Hostile, DeclaredSizeBeyondTheLimit) {
  UnpackOptions small;
  small.max_unpacked_bytes = 1 << 20;
  const std::string tar = with_declared_size(make_tar({F("big", "b")}, /*gnu=*/true), 1ull << 30);
  try {
    apply_layers(dest_, {{tar, Compression::gzip}}, small);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("entry 'big': declares 1073741824 bytes, more than the"));
  }
  expect_outside_untouched();
}

TEST_F(Hostile, DecompressionBombStopsAtTheLimit) {
  // Entries within the limit, then megabytes of zeros after the end-of-archive blocks (they
  // compress to almost nothing, and are part of the diff_id stream).
  UnpackOptions small;
  small.max_unpacked_bytes = 1 << 20;
  try {
    apply_layers(dest_, {{make_tar({F("a", "a")}) + std::string(4 << 20, '\0'), Compression::gzip}}, small);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the uncompressed layers exceed the limit of 1MiB"));
  }
  expect_outside_untouched();
}

TEST_F(Hostile, FileReplacingASymlinkDoesNotFollowIt) {
  apply_layers(dest_, {{make_tar({L("link", "../canary/secret")}), Compression::gzip},
                       {make_tar({F("link", "replaced")}), Compression::zstd}});
  EXPECT_EQ(slurp(dest_ / "link"), "replaced");
  expect_outside_untouched();
}

TEST_F(Hostile, SymlinkTargetsAreDataOnly) {
  // Links pointing outside are legal in an image; they are never followed while unpacking.
  apply_layers(dest_, {{make_tar({L("abs", canary_.string() + "/secret"), L("rel", "../../canary"),
                                  H("hl", "abs")}),
                        Compression::gzip}});
  EXPECT_EQ(fs::read_symlink(dest_ / "abs"), canary_ / "secret");
  EXPECT_TRUE(fs::is_symlink(dest_ / "hl"));  // a hardlink to the symlink itself
  expect_outside_untouched();
}

// Applies one blob to a fresh directory, handed over in chunks of `chunk` bytes; returns the
// diff digest.
std::string apply_blob(const std::string& blob, Compression c, size_t chunk = SIZE_MAX) {
  TempDir tmp;
  fs::create_directories(tmp / "root");
  sandboxrun::UniqueFd root(open((tmp / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  sandboxrun::image::RootfsWriter w(root.get(), {});
  size_t at = 0;
  return w
      .apply_layer(
          [&]() -> std::span<const std::byte> {
            const size_t n = std::min(chunk, blob.size() - at);
            at += n;
            return {reinterpret_cast<const std::byte*>(blob.data()) + at - n, n};
          },
          c, "sha256:test")
      .str();
}

TEST(ImageLayerStream, CorruptOrMislabelledStreams) {
  const std::string tar = make_tar({F("a", std::string(100000, 'a')), F("b", "b")});
  const std::string gz = compress(tar, Compression::gzip);
  const std::string zst = compress(tar, Compression::zstd);
  EXPECT_THAT([&] { apply_blob(gz.substr(0, gz.size() / 2), Compression::gzip); },
              testing::ThrowsMessage<Error>(HasSubstr("corrupt or truncated")));
  EXPECT_THAT([&] { apply_blob(zst.substr(0, zst.size() / 2), Compression::zstd); },
              testing::ThrowsMessage<Error>(HasSubstr("corrupt or truncated")));
  EXPECT_THAT([&] { apply_blob(tar, Compression::gzip); },
              testing::ThrowsMessage<Error>(HasSubstr("is not gzip as its media type says")));
  EXPECT_THAT([&] { apply_blob(gz, Compression::zstd); },
              testing::ThrowsMessage<Error>(HasSubstr("is not zstd as its media type says")));
  EXPECT_THAT([&] { apply_blob(tar.substr(0, 700), Compression::none); },
              testing::ThrowsMessage<Error>(HasSubstr("corrupt or truncated")));
  // A flipped bit either breaks decompression or changes the diff digest the caller checks.
  std::string flipped = gz;
  flipped[flipped.size() / 2] ^= 0x55;
  try {
    EXPECT_NE(apply_blob(flipped, Compression::gzip), sha256(tar));
  } catch (const Error&) {
  }
  EXPECT_EQ(apply_blob(gz, Compression::gzip), sha256(tar));
  EXPECT_EQ(apply_blob(zst, Compression::zstd), sha256(tar));
}

// libarchive's gzip reader ignores the CRC32/ISIZE trailer and whatever follows the last member;
// a blob digest computed over such bytes proves nothing about them.
TEST(ImageLayerStream, GzipTrailerAndTrailingBytesAreChecked) {
  const std::string tar = make_tar({F("a", std::string(100000, 'a')), F("b", "b")});
  const std::string gz = compress(tar, Compression::gzip);
  auto refused = [](const std::string& message) {
    return testing::ThrowsMessage<Error>(HasSubstr("layer sha256:test: " + message));
  };
  std::string bad_crc = gz;
  bad_crc[gz.size() - 8] ^= 0x01;
  EXPECT_THAT([&] { apply_blob(bad_crc, Compression::gzip); },
              refused("the gzip CRC32 trailer does not match the decompressed data"));
  std::string bad_length = gz;
  bad_length[gz.size() - 1] ^= 0x01;
  EXPECT_THAT([&] { apply_blob(bad_length, Compression::gzip); },
              refused("the gzip length trailer does not match the decompressed data"));
  EXPECT_THAT([&] { apply_blob(gz + "garbage", Compression::gzip); },
              refused("trailing garbage after gzip member 1"));
  EXPECT_THAT([&] { apply_blob(gz + std::string(1, '\0'), Compression::gzip); },
              refused("trailing garbage after gzip member 1"));
  EXPECT_THAT([&] { apply_blob(gz + std::string(600, '\0'), Compression::gzip, 7); },
              refused("trailing garbage after gzip member 1"));
  EXPECT_THAT([&] { apply_blob(gz.substr(0, gz.size() - 4), Compression::gzip); },
              refused("corrupt or truncated gzip stream"));

  // Concatenated members are one stream (gzip(1), Go's reader); any chunking gives the same.
  const std::string two = compress(tar.substr(0, 5000), Compression::gzip) +
                          compress(tar.substr(5000), Compression::gzip);
  EXPECT_EQ(apply_blob(two, Compression::gzip), sha256(tar));
  EXPECT_EQ(apply_blob(two, Compression::gzip, 1), sha256(tar));
  EXPECT_EQ(apply_blob(gz, Compression::gzip, 4096), sha256(tar));
}

}  // namespace
