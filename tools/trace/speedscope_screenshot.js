// speedscope_screenshot.js: opens a weft task trace in speedscope (a
// browser-based profile viewer that reads Chrome trace-event JSON) in
// headless Chromium and saves a screenshot; it made docs/images/trace-viewer.png.
//
//   apt-get install -y chromium
//   npm install --prefix /tmp/viewer playwright-core speedscope
//   NODE_PATH=/tmp/viewer/node_modules node tools/trace/speedscope_screenshot.js TRACE.json OUT.png \
//       [--profile N] [--zoom N] [--hover X,Y] [--title T] [--size WxH]
//
// --profile N shows the N-th thread (0: worker 0; speedscope shows one
// thread at a time), --zoom N zooms in 2^N times at the left edge,
// --hover X,Y rests the mouse there (a span's tooltip). Speedscope and the
// trace are served from 127.0.0.1 on a free port: it loads a profile by URL
// only over http (#profileURL=...). CHROMIUM names the browser
// (default /usr/bin/chromium).

const fs = require('fs');
const http = require('http');
const path = require('path');
const { chromium } = require('playwright-core');

function usage(msg) {
  console.error(`speedscope_screenshot: ${msg}`);
  console.error('usage: speedscope_screenshot.js TRACE.json OUT.png [--profile N] [--zoom N] [--hover X,Y] [--title T] [--size WxH]');
  process.exit(2);
}

const opts = { profile: 0, zoom: 0, hover: null, title: null, size: '1400x230' };
const files = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a.startsWith('--')) {
    const key = a.slice(2);
    if (!(key in opts) || i + 1 >= argv.length) usage(`bad option ${a}`);
    opts[key] = argv[++i];
  } else {
    files.push(a);
  }
}
if (files.length !== 2) usage('needs TRACE.json and OUT.png');
const [trace, out] = files;
if (!fs.existsSync(trace)) usage(`${trace}: no such file`);
const [width, height] = opts.size.split('x').map(Number);

const root = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist', 'release');
const types = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.png': 'image/png', '.ico': 'image/x-icon', '.woff2': 'font/woff2',
};

const server = http.createServer((req, res) => {
  const url = decodeURIComponent(req.url.split(/[?#]/)[0]);
  // path.normalize on an absolute path keeps a request inside root.
  const file = url === '/trace.json' ? trace : path.join(root, path.normalize(url === '/' ? '/index.html' : url));
  fs.readFile(file, (err, data) => {
    if (err) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
    res.end(data);
  });
});

server.listen(0, '127.0.0.1', async () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  try {
    const page = await browser.newPage({ viewport: { width, height } });
    const title = opts.title || path.basename(trace);
    await page.goto(`${base}/index.html#profileURL=${encodeURIComponent(`${base}/trace.json`)}` +
                    `&title=${encodeURIComponent(title)}`);
    // speedscope fetches and imports the trace after the page's load event.
    await page.waitForFunction(() => document.title.includes(' - speedscope'), null, { timeout: 30000 });
    await page.waitForTimeout(1000);
    for (let i = 0; i < Number(opts.profile); i++) {
      await page.keyboard.press('n');  // next profile (thread)
      await page.waitForTimeout(300);
    }
    // '=' zooms 2x about the mouse: at x=2 the window keeps the trace's start.
    await page.mouse.move(2, Math.min(200, height - 20));
    for (let i = 0; i < Number(opts.zoom); i++) {
      await page.keyboard.press('=');
      await page.waitForTimeout(150);
    }
    if (opts.hover) {
      const [x, y] = opts.hover.split(',').map(Number);
      await page.mouse.move(x, y);
      await page.waitForTimeout(800);
    }
    await page.screenshot({ path: out });
    console.log(`${out}: ${title} in speedscope`);
  } finally {
    await browser.close();
    server.close();
  }
});
