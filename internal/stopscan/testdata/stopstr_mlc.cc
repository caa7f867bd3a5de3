// StopStrHandler from MLC-LLM's cpp/tokenizers/streamer.cc (Apache-2.0,
// Copyright (c) 2023-2025 by Contributors), with TVM's types replaced by
// the standard library's and a driver around it. The class body is the
// original's, line for line; only the shim above it is new. Go's
// TestHandlerMatchesMLC replays what this program answers
// (mlc_reference.txt); `go test -run TestHandlerMatchesMLC -update` builds
// and runs it again (needs a C++ compiler).
//
// Input, one case per block, every string hex-encoded ("-" is empty):
//   case <k stops> <n tokens>
//   <stop> ... (k lines)
//   <token> ... (n lines)
// Output, per case: "case", then per token "put <ids released...>" and
// "stop" once triggered, and "finish <ids...>" when the tokens ran out.
#include <climits>
#include <cstdint>
#include <iostream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using String = std::string;
template <typename T>
using Array = std::vector<T>;
#define TVM_FFI_ICHECK(c) \
  if (!(c)) throw std::runtime_error("check failed: " #c)
#define TVM_FFI_ICHECK_NOTNULL(p) TVM_FFI_ICHECK((p) != nullptr)
#define TVM_FFI_ICHECK_LT(a, b) TVM_FFI_ICHECK((a) < (b))
#define TVM_FFI_ICHECK_GE(a, b) TVM_FFI_ICHECK((a) >= (b))
#define TVM_FFI_ICHECK_LE(a, b) TVM_FFI_ICHECK((a) <= (b))
#define TVM_FFI_ICHECK_NE(a, b) TVM_FFI_ICHECK((a) != (b))

/*! \brief Create the KMP partial match table for the input string. */
inline std::vector<int> CreatePartialMatchTable(const String& str) {
  int length = str.length();
  std::vector<int> partial_match_table = {-1};
  partial_match_table.reserve(length);
  for (int i = 1; i < length; ++i) {
    int ptr = partial_match_table[i - 1];
    while (ptr != -1 && str.at(ptr) != str.at(i - 1)) {
      ptr = partial_match_table[ptr];
    }
    partial_match_table.push_back(ptr + 1);
  }
  return partial_match_table;
}

class StopStrHandlerObj {
 public:
  StopStrHandlerObj(Array<String> stop_strs, const std::vector<std::string>& token_table)
      : stop_strs_(std::move(stop_strs)), token_table_(token_table) {
    int num_stop_strs = stop_strs_.size();
    cur_match_lengths_.resize(num_stop_strs, 0);

    // Create the KMP partial match table for each stop string.
    partial_match_tables_.reserve(num_stop_strs);
    for (const String& stop_str : stop_strs_) {
      TVM_FFI_ICHECK(!stop_str.empty());
      partial_match_tables_.push_back(CreatePartialMatchTable(stop_str));
    }
  }

  void Put(int32_t token_id, std::vector<int64_t>* return_token_ids) {
    TVM_FFI_ICHECK_NOTNULL(return_token_ids);

    // Return the input token id if there is no stop string.
    if (stop_strs_.empty()) {
      return_token_ids->push_back(token_id);
      return;
    }

    TVM_FFI_ICHECK(!stop_triggered_);

    TVM_FFI_ICHECK_LT(token_id, static_cast<int>(token_table_.size()));
    const std::string& token = token_table_[token_id];
    pending_token_ids_.push_back(token_id);
    pending_token_lengths_.push_back(token.length());

    for (char ch : token) {
      // The earliest starting point of stop string.
      int stop_starting_pos = std::numeric_limits<int>::max();
      // The cutoff length that can be safely return.
      int cutoff_length = std::numeric_limits<int>::max();
      // The maximum matched length.
      int max_match_length = 0;

      for (int str_id = 0; str_id < static_cast<int>(stop_strs_.size()); ++str_id) {
        // - Run one step of KMP algorithm.
        const std::vector<int>& partial_match_table = partial_match_tables_[str_id];
        int& cur_match_length = cur_match_lengths_[str_id];
        while (cur_match_length != -1 && ch != stop_strs_[str_id].at(cur_match_length)) {
          cur_match_length = partial_match_table[cur_match_length];
        }
        ++cur_match_length;

        // Case 1. The stop string is matched.
        if (cur_match_length == stop_strs_[str_id].length()) {
          stop_triggered_ = true;
          stop_starting_pos =
              std::min(stop_starting_pos,
                       pending_string_len_ + 1 - static_cast<int>(stop_strs_[str_id].length()));
          continue;
        }

        // Case 2. The stop string is not matched.
        // - Get the cutoff length that can be safely return.
        TVM_FFI_ICHECK_GE(pending_string_len_ + 1, cur_match_length);
        cutoff_length = std::min(cutoff_length, pending_string_len_ + 1 - cur_match_length);
        // - Get the updated pending string length.
        max_match_length = std::max(max_match_length, cur_match_length);
      }

      // Collect the token ids that can be safely cut off and returned.
      if (stop_triggered_) {
        cutoff_length = stop_starting_pos;
      }
      TVM_FFI_ICHECK_NE(cutoff_length, std::numeric_limits<int>::max());
      TVM_FFI_ICHECK_GE(cutoff_length, 0);
      int cum_length = 0;
      while (!pending_token_ids_.empty() &&
             cum_length + pending_token_lengths_.front() <= cutoff_length) {
        cum_length += pending_token_lengths_.front();
        return_token_ids->push_back(pending_token_ids_.front());
        pending_token_ids_.erase(pending_token_ids_.begin());
        pending_token_lengths_.erase(pending_token_lengths_.begin());
      }
      if (stop_triggered_) {
        return;
      }

      TVM_FFI_ICHECK_LE(cum_length, cutoff_length);
      // `cum_length` is the prefix length what we actually cut off.
      pending_string_len_ = (cutoff_length - cum_length) + max_match_length;
    }
  }

  void Finish(std::vector<int64_t>* return_token_ids) const {
    return_token_ids->insert(return_token_ids->end(), pending_token_ids_.begin(),
                             pending_token_ids_.end());
  };

  bool StopTriggered() const { return stop_triggered_; }

 private:
  Array<String> stop_strs_;
  std::vector<std::vector<int>> partial_match_tables_;
  std::vector<int> cur_match_lengths_;
  std::vector<std::string> token_table_;
  std::vector<int64_t> pending_token_ids_;
  std::vector<int> pending_token_lengths_;
  int pending_string_len_ = 0;
  bool stop_triggered_ = false;
};

static std::string Unhex(const std::string& s) {
  if (s == "-") return "";
  std::string out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(s.substr(i, 2), nullptr, 16)));
  }
  return out;
}

static void PrintIds(const char* what, const std::vector<int64_t>& ids) {
  std::cout << what;
  for (int64_t id : ids) std::cout << ' ' << id;
  std::cout << '\n';
}

int main() {
  std::string word;
  while (std::cin >> word) {
    if (word != "case") throw std::runtime_error("want case, got " + word);
    int k, n;
    std::cin >> k >> n;
    Array<String> stops(k);
    std::vector<std::string> tokens(n);
    for (auto& s : stops) {
      std::cin >> word;
      s = Unhex(word);
    }
    for (auto& t : tokens) {
      std::cin >> word;
      t = Unhex(word);
    }
    StopStrHandlerObj h(stops, tokens);
    std::cout << "case\n";
    for (int i = 0; i < n; ++i) {
      std::vector<int64_t> out;
      h.Put(i, &out);
      PrintIds("put", out);
      if (h.StopTriggered()) {
        std::cout << "stop\n";
        break;
      }
    }
    if (!h.StopTriggered()) {
      std::vector<int64_t> out;
      h.Finish(&out);
      PrintIds("finish", out);
    }
  }
  return 0;
}
