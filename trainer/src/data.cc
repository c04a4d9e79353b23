#include "data.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hyperpack/text.h"

namespace hyperpack::trainer {
namespace {

// Fashion-MNIST's pixel mean and standard deviation (of x / 255 over the training set).
constexpr float kPixelMean = 0.2860f, kPixelStd = 0.3530f;

Result<std::string> ReadAll(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (!f) return Status::NotFound(path, ": cannot open (does it exist?)");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  int err = 0;
  const char* msg = gzerror(f, &err);
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    return Status::Invalid(path, ": cannot decompress: ", msg ? msg : "error");
  return out;
}

uint32_t BigEndian(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

std::string Find(const std::string& dir, const std::string& stem) {
  for (const std::string& name : {stem + ".gz", stem}) {
    std::string p = (std::filesystem::path(dir) / name).string();
    if (std::filesystem::exists(p)) return p;
  }
  return (std::filesystem::path(dir) / (stem + ".gz")).string();
}

// The last `fraction` of `all` for validation, the first `train_samples` of the rest to train.
void Split(const Dataset& all, double fraction, int64_t train_samples, Dataset* train,
           Dataset* val) {
  int64_t n = all.size();
  int64_t n_val = static_cast<int64_t>(static_cast<double>(n) * fraction);
  int64_t n_train = n - n_val;
  if (train_samples > 0) n_train = std::min(n_train, train_samples);
  train->x = all.x.slice(0, 0, n_train);
  train->y = all.y.slice(0, 0, n_train);
  val->x = all.x.slice(0, n - n_val, n);
  val->y = all.y.slice(0, n - n_val, n);
}

Result<DataSplits> LoadFashionMnist(const TrainerConfig& c) {
  DataSplits s;
  auto load = [&](const std::string& prefix) -> Result<Dataset> {
    std::string images = Find(c.data_path, prefix + "-images-idx3-ubyte");
    std::string labels = Find(c.data_path, prefix + "-labels-idx1-ubyte");
    HP_ASSIGN_OR_RETURN(torch::Tensor x, ReadIdx(images));
    HP_ASSIGN_OR_RETURN(torch::Tensor y, ReadIdx(labels));
    if (x.dim() != 3 || x.size(1) != 28 || x.size(2) != 28)
      return Status::Invalid(images, ": expected N x 28 x 28 images, got ", x.sizes());
    if (y.dim() != 1 || y.size(0) != x.size(0))
      return Status::Invalid(labels, ": expected ", x.size(0), " labels, got ", y.sizes());
    Dataset d;
    // In place: the 60,000 images are 188 MB as floats, too many to copy four times.
    d.x = x.to(torch::kFloat32).div_(255.0f).sub_(kPixelMean).div_(kPixelStd).unsqueeze(1);
    d.y = y.to(torch::kInt64);
    if (d.y.max().item<int64_t>() > 9) return Status::Invalid(labels, ": labels must be 0..9");
    return d;
  };
  HP_ASSIGN_OR_RETURN(Dataset all, load("train"));
  Split(all, c.val_fraction, c.train_samples, &s.train, &s.val);
  if (c.test) {
    HP_ASSIGN_OR_RETURN(Dataset test, load("t10k"));
    s.test = test;
  }
  s.classes = 10;
  s.input_shape = {1, 28, 28};
  return s;
}

// A CSV file's cells: the header, which column is the label, the features row by row.
struct CsvTable {
  std::vector<std::string> header;
  size_t label = 0;
  std::vector<float> features;
  std::vector<std::string> labels;
};

Result<CsvTable> ParseCsv(const TrainerConfig& c, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line))
    return Status::Invalid(c.data_path, ": empty; expected a header row");
  std::vector<std::string> header;
  {
    std::stringstream ss(line);
    for (std::string h; std::getline(ss, h, ',');) header.push_back(h);
  }
  size_t label = header.size() - 1;
  if (!c.label_column.empty()) {
    auto it = std::find(header.begin(), header.end(), c.label_column);
    if (it == header.end())
      return Status::Invalid(c.data_path, ": no column '", c.label_column, "'; the header has ",
                             Join(header, ", "));
    label = static_cast<size_t>(it - header.begin());
  }
  if (header.size() < 2)
    return Status::Invalid(c.data_path, ": expected feature columns and a label");
  CsvTable t;
  std::vector<float>& features = t.features;
  std::vector<std::string>& labels = t.labels;
  int64_t row = 1;
  while (std::getline(in, line)) {
    ++row;
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (cells.size() != header.size())
      return Status::Invalid(c.data_path, ":", row, ": expected ", header.size(), " columns, got ",
                             cells.size());
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i == label) {
        labels.push_back(cells[i]);
        continue;
      }
      auto v = ParseDouble(cells[i]);
      if (!v)
        return Status::Invalid(c.data_path, ":", row, ": column '", header[i], "': '", cells[i],
                               "' is not a number");
      features.push_back(static_cast<float>(*v));
    }
  }
  if (labels.empty()) return Status::Invalid(c.data_path, ": no data rows");
  t.header = std::move(header);
  t.label = label;
  return t;
}

Result<DataSplits> LoadCsv(const TrainerConfig& c) {
  HP_ASSIGN_OR_RETURN(std::string text, ReadAll(c.data_path));
  HP_ASSIGN_OR_RETURN(CsvTable table, ParseCsv(c, text));
  const std::vector<std::string>& labels = table.labels;
  // Labels: every distinct value is a class, numbered in sorted order.
  std::map<std::string, int64_t> classes;
  for (const auto& l : labels) classes.emplace(l, 0);
  int64_t k = 0;
  for (auto& [name, id] : classes) id = k++;
  auto n = static_cast<int64_t>(labels.size());
  int64_t f = static_cast<int64_t>(table.header.size()) - 1;
  Dataset all;
  all.x = torch::from_blob(table.features.data(), {n, f}, torch::kFloat32).clone();
  std::vector<int64_t> y;
  for (const auto& l : labels) y.push_back(classes[l]);
  all.y = torch::tensor(y, torch::kInt64);
  // Rows in a seeded shuffle: CSV files are often sorted by label.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(c.seed + 17);
  all = all.Select(torch::randperm(n, gen, torch::kInt64));
  DataSplits s;
  Split(all, c.val_fraction, c.train_samples, &s.train, &s.val);
  // Standardise with the training rows' statistics.
  auto mean = s.train.x.mean(0), sd = s.train.x.std(0).clamp_min(1e-8);
  s.train.x = (s.train.x - mean) / sd;
  s.val.x = (s.val.x - mean) / sd;
  s.classes = k;
  s.input_shape = {f};
  return s;
}

Result<DataSplits> LoadText(const TrainerConfig& c) {
  HP_ASSIGN_OR_RETURN(std::string text, ReadAll(c.data_path));
  if (static_cast<int64_t>(text.size()) < 4 * (c.seq_len + 1))
    return Status::Invalid(c.data_path, ": ", text.size(), " characters is too little text for ",
                           "sequences of ", c.seq_len);
  std::map<unsigned char, int64_t> vocab;
  for (unsigned char ch : text) vocab.emplace(ch, 0);
  int64_t k = 0;
  for (auto& [ch, id] : vocab) id = k++;
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (unsigned char ch : text) ids.push_back(vocab[ch]);
  int64_t L = c.seq_len;
  int64_t n = (static_cast<int64_t>(ids.size()) - 1) / L;
  auto all_ids = torch::tensor(ids, torch::kInt64);
  Dataset all;
  all.x = all_ids.slice(0, 0, n * L).view({n, L});
  all.y = all_ids.slice(0, 1, n * L + 1).view({n, L});
  DataSplits s;
  Split(all, std::max(c.val_fraction, 1.0 / static_cast<double>(n)), c.train_samples, &s.train,
        &s.val);
  s.classes = k;
  s.input_shape = {L};
  s.sequence = true;
  return s;
}

}  // namespace

Dataset Dataset::Select(const torch::Tensor& index) const {
  torch::Tensor at = index.device() == x.device() ? index : index.to(x.device());
  return {x.index_select(0, at), y.index_select(0, at)};
}

Dataset Dataset::To(const torch::Device& device) const { return {x.to(device), y.to(device)}; }

DataSplits DataSplits::To(const torch::Device& device) const {
  DataSplits out = *this;
  out.train = train.To(device);
  out.val = val.To(device);
  if (test) out.test = test->To(device);
  return out;
}

Result<torch::Tensor> ReadIdx(const std::string& path) {
  HP_ASSIGN_OR_RETURN(std::string data, ReadAll(path));
  if (data.size() < 4 || data[0] != 0 || data[1] != 0)
    return Status::Invalid(path, ": not an IDX file (expected the magic 0x0000 then a type)");
  if (static_cast<uint8_t>(data[2]) != 0x08)
    return Status::Invalid(path, ": expected unsigned bytes (IDX type 0x08)");
  int dims = static_cast<uint8_t>(data[3]);
  if (dims < 1 || data.size() < 4 + 4 * static_cast<size_t>(dims))
    return Status::Invalid(path, ": truncated header");
  std::vector<int64_t> shape;
  size_t count = 1;
  for (int i = 0; i < dims; ++i) {
    shape.push_back(BigEndian(data, 4 + 4 * i));
    count *= static_cast<size_t>(shape.back());
  }
  size_t offset = 4 + 4 * static_cast<size_t>(dims);
  if (data.size() - offset != count)
    return Status::Invalid(path, ": expected ", count, " bytes of data for shape ",
                           Join(
                               [&] {
                                 std::vector<std::string> p;
                                 for (auto d : shape) p.push_back(std::to_string(d));
                                 return p;
                               }(),
                               " x "),
                           ", found ", data.size() - offset);
  auto t = torch::empty(shape, torch::kUInt8);
  std::memcpy(t.data_ptr(), data.data() + offset, count);
  return t;
}

Result<DataSplits> LoadData(const TrainerConfig& config) {
  // A warm process (--serve) runs trial after trial on the same data: it is loaded once. The
  // tensors are shared, never written in place. The key holds everything the splits depend on,
  // and the file's modification time so that data rewritten between trials is read again.
  static std::string cached_key;
  static std::optional<DataSplits> cached;
  std::error_code ec;
  const auto modified = std::filesystem::last_write_time(config.data_path, ec);
  const std::string key = StrCat(
      Name(config.data), "|", config.data_path, "|", ec ? 0 : modified.time_since_epoch().count(),
      "|", config.label_column, "|", config.train_samples, "|", config.val_fraction, "|",
      config.test, "|", config.seq_len, "|", config.data == DataKind::kCsv ? config.seed : 0);
  if (cached && key == cached_key) return *cached;
  cached.reset();  // the old data's memory goes before the new data's comes
  Result<DataSplits> loaded = config.data == DataKind::kFmnist ? LoadFashionMnist(config)
                              : config.data == DataKind::kCsv  ? LoadCsv(config)
                                                               : LoadText(config);
  if (loaded.ok()) {
    cached = *loaded;
    cached_key = key;
  }
  return loaded;
}

}  // namespace hyperpack::trainer
