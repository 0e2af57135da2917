// unpack_image over fixture layouts: tags, media types, verification of every blob and diff_id,
// atomicity (a failed unpack leaves nothing), ownership, and the LAYOUT[:TAG] syntax.
#include <gmock/gmock.h>
#include <sys/wait.h>

#include "image_fixture.hpp"
#include "sandboxrun/error.hpp"

namespace {

using namespace image_test;
using sandboxrun::Error;
using sandboxrun::image::ImageRef;
using sandboxrun::image::unpack_image;
using testing::HasSubstr;
using testing::ThrowsMessage;

class Unpack : public testing::Test {
 protected:
  void SetUp() override {
    layout_ = tmp_ / "layout";
    dest_ = tmp_ / "out" / "rootfs";
    fs::create_directories(tmp_ / "out");
  }

  // Expects unpacking to fail with `message`, leaving no DEST and no temporary beside it.
  void expect_failure(const ImageRef& ref, const std::string& message) {
    try {
      unpack_image(ref, dest_);
      ADD_FAILURE() << "no error; expected: " << message;
    } catch (const Error& e) {
      EXPECT_THAT(e.describe(), HasSubstr(message));  // what() and the hint
    }
    EXPECT_TRUE(fs::is_empty(tmp_ / "out")) << "a failed unpack left something behind";
  }

  TempDir tmp_;
  fs::path layout_, dest_;
};

TEST_F(Unpack, TwoTagsGzipAndZstd) {
  LayoutBuilder b(layout_);
  b.add_image({{make_tar({D("etc"), F("etc/os", "one")}), Compression::gzip}}, "one");
  b.add_image({{make_tar({D("etc"), F("etc/os", "base"), F("etc/gone", "g")}), Compression::zstd},
               {make_tar({F("etc/os", "two"), F("etc/.wh.gone", "")}), Compression::gzip}},
              "two", {{"config", {{"User", "1000:1000"}, {"Entrypoint", {"/bin/sh", "-c"}}}}});

  const auto one = unpack_image({layout_, "one"}, dest_);
  EXPECT_EQ(slurp(dest_ / "etc" / "os"), "one");
  EXPECT_EQ(one.config.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(one.config.cmd, std::vector<std::string>{"python3"});
  EXPECT_EQ(one.config.working_dir, "/work");
  EXPECT_EQ(one.stats.layers, 1u);

  const auto two = unpack_image({layout_, "two"}, tmp_ / "out" / "two");
  EXPECT_EQ(snapshot(tmp_ / "out" / "two"),
            (std::map<std::string, std::string>{{"etc", "dir 0755"}, {"etc/os", "file 0644 'two'"}}));
  EXPECT_EQ(two.config.user, "1000:1000");
  EXPECT_EQ(two.config.entrypoint, (std::vector<std::string>{"/bin/sh", "-c"}));
  EXPECT_EQ(two.stats.layers, 2u);
  EXPECT_EQ(two.manifest_digest, b.index_entries()[1]["digest"]);
  EXPECT_NE(one.manifest_digest, two.manifest_digest);
}

TEST_F(Unpack, TagSelection) {
  LayoutBuilder b(layout_);
  b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "latest");
  // One manifest: no tag needed.
  unpack_image({layout_, ""}, dest_);
  EXPECT_EQ(slurp(dest_ / "a"), "1");

  // Several manifests, one of them `latest`: no tag means `latest`, as in Docker and skopeo.
  b.add_image({{make_tar({F("a", "2")}), Compression::gzip}}, "3.12");
  fs::remove_all(dest_);
  unpack_image({layout_, ""}, dest_);
  EXPECT_EQ(slurp(dest_ / "a"), "1");
  fs::remove_all(dest_);
  unpack_image({layout_, "3.12"}, dest_);
  EXPECT_EQ(slurp(dest_ / "a"), "2");
  fs::remove_all(dest_);
  expect_failure({layout_, "nope"}, "no manifest is tagged 'nope' (tags in this layout: 3.12, latest)");
}

TEST_F(Unpack, SeveralTagsWithoutLatestAreAmbiguous) {
  LayoutBuilder b(layout_);
  b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "3.11");
  b.add_image({{make_tar({F("a", "2")}), Compression::gzip}}, "3.12");
  expect_failure({layout_, ""},
                 "holds 2 manifests and none is tagged 'latest'; name one as LAYOUT:TAG (tags in this "
                 "layout: 3.11, 3.12)");
}

TEST_F(Unpack, DockerMediaTypesAndNestedIndex) {
  LayoutBuilder b(layout_);
  const auto desc = b.add_image({{make_tar({F("a", "docker")}), Compression::gzip}}, "");
  // Rewrite the manifest with Docker's media types, then list it through a nested index.
  auto manifest = nlohmann::json::parse(slurp(b.blob_path(desc["digest"])));
  manifest["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json";
  manifest["config"]["mediaType"] = "application/vnd.docker.container.image.v1+json";
  manifest["layers"][0]["mediaType"] = "application/vnd.docker.image.rootfs.diff.tar.gzip";
  auto m = b.blob(manifest.dump(), "application/vnd.docker.distribution.manifest.v2+json");
  auto other = m;
  other["platform"] = {{"os", "linux"}, {"architecture", "no-such-arch"}};
  m["platform"] = {{"os", "linux"}, {"architecture", sandboxrun::image::host_architecture()}};
  const nlohmann::json list = {{"schemaVersion", 2},
                               {"mediaType", "application/vnd.docker.distribution.manifest.list.v2+json"},
                               {"manifests", {other, m}}};
  auto idx = b.blob(list.dump(), "application/vnd.docker.distribution.manifest.list.v2+json");
  idx["annotations"] = {{"org.opencontainers.image.ref.name", "multi"}};
  b.index_entries() = nlohmann::json::array({idx});
  b.write_index();
  const auto r = unpack_image({layout_, "multi"}, dest_);
  EXPECT_EQ(slurp(dest_ / "a"), "docker");
  EXPECT_EQ(r.manifest_digest, m["digest"]);
}

TEST_F(Unpack, CorruptBlobIsRefused) {
  LayoutBuilder b(layout_);
  const auto desc = b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "t");
  const auto manifest = nlohmann::json::parse(slurp(b.blob_path(desc["digest"])));
  const fs::path layer = b.blob_path(manifest["layers"][0]["digest"]);
  std::string data = slurp(layer);
  data[data.size() / 2] ^= 1;  // same size, different content
  put(layer, data);
  expect_failure({layout_, "t"}, "does not match its digest");
}

TEST_F(Unpack, BlobOfTheWrongSizeIsRefused) {
  LayoutBuilder b(layout_);
  const auto desc = b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "t");
  const auto manifest = nlohmann::json::parse(slurp(b.blob_path(desc["digest"])));
  const fs::path layer = b.blob_path(manifest["layers"][0]["digest"]);
  put(layer, slurp(layer) + "x");
  expect_failure({layout_, "t"}, "bytes but its descriptor says");
  fs::remove(layer);
  expect_failure({layout_, "t"}, "is missing");
}

TEST_F(Unpack, TamperedManifestIsRefused) {
  LayoutBuilder b(layout_);
  const auto desc = b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "t");
  std::string m = slurp(b.blob_path(desc["digest"]));
  m[m.find("tar+gzip")] = 'T';
  put(b.blob_path(desc["digest"]), m);
  expect_failure({layout_, "t"}, "does not match its digest");
}

TEST_F(Unpack, AbsurdDeclaredDocumentSize) {
  LayoutBuilder b(layout_);
  b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "t");
  b.index_entries()[0]["size"] = 1ull << 40;
  b.write_index();
  expect_failure({layout_, "t"}, "declares 1099511627776 bytes, more than the 4194304 allowed");
}

TEST_F(Unpack, WrongDiffIdIsRefused) {
  LayoutBuilder b(layout_);
  const std::string fake = sha256("something else");
  b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "t",
              {{"rootfs", {{"type", "layers"}, {"diff_ids", {fake}}}}});
  expect_failure({layout_, "t"}, "but the config's diff_id is " + fake);
}

TEST_F(Unpack, DiffIdCountMustMatch) {
  LayoutBuilder b(layout_);
  b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "t",
              {{"rootfs", {{"type", "layers"}, {"diff_ids", nlohmann::json::array()}}}});
  expect_failure({layout_, "t"}, "the manifest has 1 layers but the config lists 0 diff_ids");
}

TEST_F(Unpack, TruncatedGzipLayerIsRefused) {
  // A truncated blob whose descriptor matches it: only the decompressor can notice.
  LayoutBuilder b(layout_);
  const std::string tar = make_tar({F("a", std::string(200000, 'a')), F("b", "b")});
  const std::string gz = compress(tar, Compression::gzip);
  const auto layer = b.blob(gz.substr(0, gz.size() - 100), "application/vnd.oci.image.layer.v1.tar+gzip");
  const nlohmann::json config = {{"os", "linux"}, {"rootfs", {{"type", "layers"}, {"diff_ids", {sha256(tar)}}}}};
  const nlohmann::json manifest = {{"schemaVersion", 2},
                                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                   {"config", b.blob(config.dump(), "application/vnd.oci.image.config.v1+json")},
                                   {"layers", {layer}}};
  b.index_entries().push_back(b.blob(manifest.dump(), "application/vnd.oci.image.manifest.v1+json"));
  b.write_index();
  expect_failure({layout_, ""}, "corrupt or truncated");
}

TEST_F(Unpack, GzipLayerWithACorruptTrailerIsRefused) {
  // The CRC32 is damaged before the blob was hashed: digest and size match, only the trailer
  // check can notice.
  LayoutBuilder b(layout_);
  const std::string tar = make_tar({F("a", std::string(200000, 'a'))});
  std::string gz = compress(tar, Compression::gzip);
  gz[gz.size() - 6] ^= 0x20;
  const auto layer = b.blob(gz, "application/vnd.oci.image.layer.v1.tar+gzip");
  const nlohmann::json config = {{"os", "linux"}, {"rootfs", {{"type", "layers"}, {"diff_ids", {sha256(tar)}}}}};
  const nlohmann::json manifest = {{"schemaVersion", 2},
                                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                   {"config", b.blob(config.dump(), "application/vnd.oci.image.config.v1+json")},
                                   {"layers", {layer}}};
  b.index_entries().push_back(b.blob(manifest.dump(), "application/vnd.oci.image.manifest.v1+json"));
  b.write_index();
  expect_failure({layout_, ""}, "layer " + layer["digest"].get<std::string>() +
                                    ": the gzip CRC32 trailer does not match the decompressed data");
}

TEST_F(Unpack, HostileLayerLeavesNoDest) {
  LayoutBuilder b(layout_);
  b.add_image({{make_tar({D("ok"), F("ok/file", std::string(100000, 'x'))}), Compression::gzip},
               {make_tar({L("evil", "/"), F("evil/tmp/pwned", "x")}), Compression::zstd}},
              "t");
  expect_failure({layout_, "t"}, "entry 'evil/tmp/pwned': 'evil/tmp' leads outside the image");
  EXPECT_FALSE(fs::exists("/tmp/pwned"));
}

TEST_F(Unpack, UnsupportedMediaTypes) {
  LayoutBuilder b(layout_);
  const auto desc = b.add_image({{make_tar({F("a", "1")}), Compression::gzip}}, "t");
  auto manifest = nlohmann::json::parse(slurp(b.blob_path(desc["digest"])));
  manifest["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+bzip2";
  auto m = b.blob(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  m["annotations"] = {{"org.opencontainers.image.ref.name", "bz"}};
  manifest["config"]["mediaType"] = "application/vnd.cncf.helm.config.v1+json";
  manifest["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip";
  auto art = b.blob(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  art["annotations"] = {{"org.opencontainers.image.ref.name", "helm"}};
  b.index_entries().push_back(m);
  b.index_entries().push_back(art);
  b.write_index();
  expect_failure({layout_, "bz"}, "unsupported layer media type 'application/vnd.oci.image.layer.v1.tar+bzip2'");
  expect_failure({layout_, "helm"}, "is not a container image config");
}

TEST_F(Unpack, NotALayout) {
  fs::create_directories(layout_);
  expect_failure({layout_, ""}, "oci-layout");
  expect_failure({tmp_ / "missing", ""}, "No such file or directory");
}

TEST_F(Unpack, ExistingDestination) {
  LayoutBuilder b(layout_);
  b.add_image({{make_tar({F("a", "new")}), Compression::gzip}}, "t");
  fs::create_directories(dest_);  // an empty directory is fine
  unpack_image({layout_, "t"}, dest_);
  EXPECT_EQ(slurp(dest_ / "a"), "new");

  put(dest_ / "a", "old");
  EXPECT_THAT([&] { unpack_image({layout_, "t"}, dest_); },
              ThrowsMessage<Error>(HasSubstr("already exists and is not empty")));
  EXPECT_EQ(slurp(dest_ / "a"), "old");

  sandboxrun::image::UnpackOptions replace;
  replace.replace = true;
  unpack_image({layout_, "t"}, dest_, replace);
  EXPECT_EQ(slurp(dest_ / "a"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp_ / "out"), fs::directory_iterator()), 1);

  unpack_image({layout_, "t"}, tmp_ / "new" / "parents" / "rootfs");  // like mkdir -p
  EXPECT_EQ(slurp(tmp_ / "new" / "parents" / "rootfs" / "a"), "new");
}

TEST_F(Unpack, OwnershipKeptAsRootMappedToCallerOtherwise) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to compare both modes";
  LayoutBuilder b(layout_);
  Entry f = F("f", "x", 04755);
  f.uid = 1234;
  f.gid = 1234;
  Entry d = D("d", 0700);
  d.uid = 4321;
  b.add_image({{make_tar({f, d, F("d/inner", "i")}), Compression::gzip}}, "t");
  fs::permissions(tmp_.path(), fs::perms::all);
  fs::permissions(layout_, fs::perms::all);

  unpack_image({layout_, "t"}, dest_);
  struct stat st {};
  ASSERT_EQ(lstat((dest_ / "f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_mode & 07777, 04755u);
  ASSERT_EQ(lstat((dest_ / "d").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4321u);

  // As an unprivileged user: everything belongs to the caller, even inside a 0700 directory.
  const fs::path user_out = tmp_ / "user";
  fs::create_directories(user_out);
  ASSERT_EQ(chown(user_out.c_str(), 65534, 65534), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
    try {
      unpack_image({layout_, "t"}, user_out / "rootfs");
      _exit(0);
    } catch (const std::exception& e) {
      fprintf(stderr, "%s\n", e.what());
      _exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (const char* name : {"f", "d", "d/inner"}) {
    ASSERT_EQ(lstat((user_out / "rootfs" / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_uid, 65534u) << name;
  }
  ASSERT_EQ(lstat((user_out / "rootfs" / "d").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST(ImageRefParse, SplitsOnTheLastColonOfAnExistingDirectory) {
  TempDir tmp;
  const fs::path odd = tmp / "with:colon";
  fs::create_directories(odd);
  using sandboxrun::image::parse_image_ref;
  const auto plain = parse_image_ref(tmp.path().string() + ":3.12");
  EXPECT_EQ(plain.layout, tmp.path());
  EXPECT_EQ(plain.tag, "3.12");
  const auto colon_dir = parse_image_ref(odd.string());  // "with" is not a directory
  EXPECT_EQ(colon_dir.layout, odd);
  EXPECT_EQ(colon_dir.tag, "");
  const auto colon_tag = parse_image_ref(odd.string() + ":latest");
  EXPECT_EQ(colon_tag.layout, odd);
  EXPECT_EQ(colon_tag.tag, "latest");
  EXPECT_EQ(parse_image_ref("missing:tag").layout, "missing:tag");
  EXPECT_EQ(colon_tag.str(), odd.string() + ":latest");
}

TEST(ImageOci, DigestParsing) {
  using sandboxrun::image::Digest;
  const std::string hex(64, 'a');
  EXPECT_EQ(Digest::parse("sha256:" + hex).hex, hex);
  EXPECT_EQ(Digest::parse("sha256:" + hex).dirname(), "sha256-" + hex);
  EXPECT_EQ(Digest::parse("sha512:" + std::string(128, '0')).algorithm, "sha512");
  for (const std::string& bad : {"sha256:" + hex.substr(1), "sha256:" + std::string(64, 'A'), "md5:" + hex,
                                hex, "sha256:../../../../etc/passwd" + hex})
    EXPECT_THROW(Digest::parse(bad), Error) << bad;
}

TEST(ImageOci, ParsersRejectMalformedDocuments) {
  using sandboxrun::image::parse_index;
  using sandboxrun::image::parse_manifest;
  EXPECT_THAT([] { parse_index("{", "idx"); }, ThrowsMessage<Error>(HasSubstr("idx: invalid JSON")));
  EXPECT_THAT([] { parse_index(R"({"schemaVersion":1,"manifests":[]})", "idx"); },
              ThrowsMessage<Error>(HasSubstr("schemaVersion must be 2")));
  EXPECT_THAT([] { parse_index(R"({"schemaVersion":2})", "idx"); },
              ThrowsMessage<Error>(HasSubstr("missing \"manifests\"")));
  EXPECT_THAT(
      [] {
        parse_index(R"({"schemaVersion":2,"manifests":[{"mediaType":"x","digest":"sha256:00","size":1}]})",
                    "idx");
      },
      ThrowsMessage<Error>(HasSubstr("is not a supported digest")));
  EXPECT_THAT(
      [] {
        parse_index(R"({"schemaVersion":2,"manifests":[{"mediaType":"x","digest":"sha256:)" +
                        std::string(64, '0') + R"(","size":-1}]})",
                    "idx");
      },
      ThrowsMessage<Error>(HasSubstr("\"size\" has the wrong type")));
  EXPECT_THAT([] { parse_manifest(R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json"})", "m"); },
              ThrowsMessage<Error>(HasSubstr("unexpected mediaType")));
}

}  // namespace
