#pragma once
// A small, strict reader of the XML (SVG) and HTML that drover writes, for tests: it checks that
// tags nest and close, attributes are quoted and unique, text has no raw '<' or stray '&', and
// entities are known; and it gives back the element tree so tests can look for what they expect
// instead of matching text. HTML mode knows void elements (<meta>) and raw text (<script>,
// <style>). Not a general parser: no CDATA, no namespaces prefixes, no DTD internals.
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"

namespace drover::testing {

struct XmlNode {
  std::string name;  // "" for the document
  std::map<std::string, std::string> attrs;
  std::vector<XmlNode> children;
  std::string text;   // the text directly inside, entities decoded
  std::string inner;  // all the text inside, children's included, in document order

  std::string Attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? "" : it->second;
  }
  bool HasClass(const std::string& cls) const {
    std::string all = " " + Attr("class") + " ";
    return all.find(" " + cls + " ") != std::string::npos;
  }
  // Every element below (not this one) named `tag` ("" = any) with class `cls` ("" = any), in
  // document order.
  std::vector<const XmlNode*> FindAll(const std::string& tag, const std::string& cls = "") const {
    std::vector<const XmlNode*> out;
    Collect(tag, cls, &out);
    return out;
  }
  // The text of this element and everything below it, as a reader sees it.
  const std::string& AllText() const { return inner; }

 private:
  void Collect(const std::string& tag, const std::string& cls,
               std::vector<const XmlNode*>* out) const {
    for (const auto& c : children) {
      if ((tag.empty() || c.name == tag) && (cls.empty() || c.HasClass(cls))) out->push_back(&c);
      c.Collect(tag, cls, out);
    }
  }
};

struct XmlDocument {
  std::string error;  // "" when well-formed; else what is wrong and the byte offset
  XmlNode root;       // the document: its children are the top-level elements
};

namespace xml_detail {

inline bool NameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' ||
         c == '.';
}


class Reader {
 public:
  Reader(std::string_view s, bool html) : s_(s), html_(html) {}

  XmlDocument Read() {
    XmlDocument doc;
    std::vector<XmlNode*> open = {&doc.root};
    while (i_ < s_.size() && error_.empty()) {
      if (s_[i_] != '<') {
        std::string text;
        ReadText(&text);
        open.back()->text += text;
        for (XmlNode* n : open) n->inner += text;
        continue;
      }
      if (s_.substr(i_, 4) == "<!--") {
        size_t end = s_.find("-->", i_ + 4);
        if (end == std::string_view::npos) return Fail(doc, "unclosed comment");
        i_ = end + 3;
      } else if (s_.substr(i_, 2) == "<?") {
        if (i_ != 0) return Fail(doc, "XML declaration not at the start");
        size_t end = s_.find("?>", i_);
        if (end == std::string_view::npos) return Fail(doc, "unclosed XML declaration");
        i_ = end + 2;
      } else if (s_.substr(i_, 2) == "<!") {
        size_t end = s_.find('>', i_);
        if (end == std::string_view::npos) return Fail(doc, "unclosed declaration");
        i_ = end + 1;
      } else if (s_.substr(i_, 2) == "</") {
        i_ += 2;
        std::string name = ReadName();
        SkipSpace();
        if (i_ >= s_.size() || s_[i_] != '>') return Fail(doc, "bad closing tag </" + name);
        ++i_;
        if (open.size() < 2) return Fail(doc, "</" + name + "> closes nothing");
        if (open.back()->name != name) {
          return Fail(doc, "</" + name + "> closes <" + open.back()->name + ">");
        }
        open.pop_back();
      } else {
        ++i_;
        XmlNode node;
        node.name = ReadName();
        if (node.name.empty()) return Fail(doc, "'<' that starts no tag");
        bool self_closed = false;
        while (true) {
          SkipSpace();
          if (i_ >= s_.size()) return Fail(doc, "unclosed tag <" + node.name);
          if (s_[i_] == '>') {
            ++i_;
            break;
          }
          if (s_.substr(i_, 2) == "/>") {
            i_ += 2;
            self_closed = true;
            break;
          }
          std::string key = ReadName();
          if (key.empty()) return Fail(doc, "bad attribute in <" + node.name);
          if (i_ >= s_.size() || s_[i_] != '=') {
            return Fail(doc, "attribute " + key + " of <" + node.name + "> has no value");
          }
          ++i_;
          if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) {
            return Fail(doc, "attribute " + key + " of <" + node.name + "> is not quoted");
          }
          char quote = s_[i_++];
          std::string value;
          while (i_ < s_.size() && s_[i_] != quote && error_.empty()) {
            if (s_[i_] == '<') return Fail(doc, "raw '<' in attribute " + key);
            if (s_[i_] == '&') {
              ReadEntity(&value);
            } else {
              value += s_[i_++];
            }
          }
          if (!error_.empty()) return Fail(doc, error_);
          if (i_ >= s_.size()) return Fail(doc, "unterminated attribute " + key);
          ++i_;
          if (!node.attrs.emplace(key, value).second) {
            return Fail(doc, "attribute " + key + " twice in <" + node.name + ">");
          }
        }
        if (!html_ && open.size() == 1 && !doc.root.children.empty()) {
          return Fail(doc, "a second root element <" + node.name + ">");
        }
        open.back()->children.push_back(std::move(node));
        XmlNode* added = &open.back()->children.back();
        if (self_closed || (html_ && IsVoid(added->name))) continue;
        if (html_ && (added->name == "script" || added->name == "style")) {
          std::string close = "</" + added->name + ">";
          size_t end = s_.find(close, i_);
          if (end == std::string_view::npos) return Fail(doc, "unclosed <" + added->name + ">");
          added->text = added->inner = std::string(s_.substr(i_, end - i_));
          i_ = end + close.size();
          continue;
        }
        open.push_back(added);
      }
    }
    if (!error_.empty()) return Fail(doc, error_);
    if (open.size() > 1) return Fail(doc, "<" + open.back()->name + "> is never closed");
    if (doc.root.children.empty()) return Fail(doc, "no element");
    return doc;
  }

 private:
  static bool IsVoid(const std::string& n) {
    for (const char* v : {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
                          "meta", "source", "track", "wbr"}) {
      if (n == v) return true;
    }
    return false;
  }
  XmlDocument& Fail(XmlDocument& doc, const std::string& what) {
    doc.error = what + " (at byte " + std::to_string(i_) + ")";
    return doc;
  }
  void SkipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  std::string ReadName() {
    size_t start = i_;
    while (i_ < s_.size() && NameChar(s_[i_])) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }
  void ReadText(std::string* out) {
    while (i_ < s_.size() && s_[i_] != '<' && error_.empty()) {
      if (s_[i_] == '&') {
        ReadEntity(out);
      } else {
        *out += s_[i_++];
      }
    }
  }
  void ReadEntity(std::string* out) {
    size_t end = s_.find(';', i_);
    if (end == std::string_view::npos || end - i_ > 10) {
      error_ = "stray '&'";
      return;
    }
    std::string_view e = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    if (e == "amp")
      *out += '&';
    else if (e == "lt")
      *out += '<';
    else if (e == "gt")
      *out += '>';
    else if (e == "quot")
      *out += '"';
    else if (e == "apos")
      *out += '\'';
    else if (e.size() > 1 && e[0] == '#') {
      bool hex = e[1] == 'x';
      std::string digits(e.substr(hex ? 2 : 1));
      if (digits.empty()) {
        error_ = "empty character reference";
        return;
      }
      AppendUtf8(*out, static_cast<uint32_t>(std::stoul(digits, nullptr, hex ? 16 : 10)));
    } else {
      error_ = "unknown entity &" + std::string(e) + ";";
    }
  }

  std::string_view s_;
  bool html_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace xml_detail

inline XmlDocument ParseXml(std::string_view text) {
  return xml_detail::Reader(text, false).Read();
}
inline XmlDocument ParseHtml(std::string_view text) {
  return xml_detail::Reader(text, true).Read();
}

}  // namespace drover::testing
