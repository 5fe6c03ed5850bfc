// CHANGELOG.md as a Debian changelog (deb-changelog(5)), for /usr/share/doc/chair-agent/changelog.gz:
// each "## <version> (<date>)" section becomes an entry, its "- " items (with their continuation
// lines) the entry's "  * " lines wrapped at 80 columns. The newest entry carries the build's full
// version and time, so `apt changelog`-style tools and lintian see the package's own version.

const RFC2822_DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const RFC2822_MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function rfc2822(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${RFC2822_DAYS[d.getUTCDay()]}, ${p(d.getUTCDate())} ${RFC2822_MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`;
}

function wrap(text, first, rest, width = 80) {
  const lines = [];
  let line = first;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line.length + word.length + 1 > width && line.trim() !== first.trim()) {
      lines.push(line);
      line = rest;
    }
    line += (line === first || line === rest ? '' : ' ') + word;
  }
  lines.push(line);
  return lines.join('\n');
}

/** @param {string} markdown @param {{ version: string, maintainer: string, epoch: string | number }} opts */
export function debianChangelog(markdown, { version, maintainer, epoch }) {
  const sections = [];
  for (const line of markdown.split('\n')) {
    const head = /^## (\S+) \((\d{4}-\d\d-\d\d)\)\s*$/.exec(line);
    if (head) {
      sections.push({ version: head[1], date: head[2], items: [] });
      continue;
    }
    const current = sections[sections.length - 1];
    if (!current) continue;
    if (line.startsWith('- ')) current.items.push(line.slice(2).trim());
    else if (/^\s+\S/.test(line) && current.items.length > 0) current.items[current.items.length - 1] += ` ${line.trim()}`;
  }
  if (sections.length === 0) throw new Error('CHANGELOG.md has no "## <version> (<date>)" section');
  const release = version.split('+')[0];
  if (sections[0].version !== release) throw new Error(`CHANGELOG.md's newest section is ${sections[0].version}, package.json says ${release}: add a section for it`);
  return sections
    .map((s, i) => {
      const when = i === 0 ? new Date(Number(epoch) * 1000) : new Date(`${s.date}T00:00:00Z`);
      // Markdown's code spans mean nothing in a changelog.
      const items = s.items.map((item) => wrap(item.replaceAll('`', ''), '  * ', '    '));
      return `chair-agent (${i === 0 ? version : s.version}) stable; urgency=medium\n\n${items.join('\n')}\n\n -- ${maintainer}  ${rfc2822(when)}\n`;
    })
    .join('\n');
}
